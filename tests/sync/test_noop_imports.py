"""A ``sharesync sync`` with nothing new imports no database toolkit, Arrow, Spark or Dagster.

That is what keeps the no-op process short (docs/benchmarks.md: 0.3–0.5 s); the check is on
``sys.modules`` in a fresh process, not on a clock. The state store is seeded directly with
checkpoints at the provider's versions that record their targets as sharesync does (Delta table
id and version; the targets written by ``deltalake``), so no engine is needed to get there and
the pass still looks at every target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import yaml
from deltalake import DeltaTable, write_deltalake
from support.faults import SharingServer

from sharesync.state import Checkpoint, open_store
from sharesync.state.database import dispose_databases
from sharesync.sync.core.config import ENV_OVERRIDES, load_config

# Imported by a pass that has something to do, never by one that has not.
HEAVY = ("sqlalchemy", "alembic", "pydantic_settings", "pyarrow", "deltalake", "pyspark", "pysail", "dagster")

CHILD = """
import json, sys
from sharesync.sync.cli.main import main
try:
    main(["--config", sys.argv[1], "sync"])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "heavy": sorted(m for m in sys.argv[2:] if m in sys.modules)}))
"""


def test_a_pass_with_nothing_new_imports_nothing_heavy(sharing_server: SharingServer, tmp_path: Path) -> None:
    assert sharing_server.profile_path is not None
    tables = {"demo.sales.orders": ("merge", ["id"]), "demo.sales.customers": ("append", [])}
    config_file = tmp_path / "sharesync.yaml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "profile": str(sharing_server.profile_path),
                "state_store": "sqlite:///.sharesync/state.db",
                "tables": [
                    {"name": name, "target": f"warehouse/{name}", "mode": mode, "keys": keys}
                    for name, (mode, keys) in tables.items()
                ],
            }
        )
    )
    config = load_config(config_file)
    store = open_store(config.state_store)
    for table in config.tables:
        version = DeltaTable(str(sharing_server.root.joinpath(*table.name.split(".")))).version()
        write_deltalake(table.target, pa.table({"id": [1]}))
        target = DeltaTable(table.target)
        checkpoint = Checkpoint(
            table.name,
            version,
            "table-id",
            "fingerprint",
            table.target,
            table.mode.value,
            target_table_id=target.metadata().id,
            target_version=target.version(),
            target_mode=table.mode.value,
        )
        store.advance_checkpoint(checkpoint, expected_version=None)
    dispose_databases()
    env = {key: value for key, value in os.environ.items() if key not in ENV_OVERRIDES.values()}

    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(config_file), *HEAVY],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr
    *table_lines, last = done.stdout.strip().splitlines()
    assert json.loads(last) == {"code": 0, "heavy": []}, done.stderr
    assert sum("up to date" in line for line in table_lines) == 2, done.stdout
