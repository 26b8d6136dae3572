"""In-process probes, each run as its own child process by ``bench.run``.

* ``noop --config CFG``: import time of the engine modules, then ``SyncEngine.sync_all()`` on a
  config whose tables are all up to date — the first call (creates the HTTP client, reads the
  checkpoints) and the median of ``--repeat`` more; checks every outcome is ``up_to_date`` and
  that no Spark engine was started (``pysail`` never imported, no embedded server), and lists
  which of the modules a no-op pass should not need were imported (``heavy_imported``).
* ``poll --config CFG``: ``SyncEngine.source_versions()`` over every configured table (1,000 in
  the benchmark) — first call and median of ``--repeat`` more; counts tables that failed.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# What a pass with nothing new should never import (each costs 0.05-0.3 s of start-up).
HEAVY_MODULES = ("sqlalchemy", "alembic", "pydantic_settings", "pyarrow", "deltalake", "pyspark", "pysail", "dagster")


def _timed(fn):  # noqa: ANN001, ANN202
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def noop(config_file: str, repeat: int) -> dict[str, object]:
    began = time.perf_counter()
    from sharesync.pipelines.run.engine import SyncEngine
    from sharesync.sync.core.config import load_config

    imported = time.perf_counter() - began
    config = load_config(config_file)
    with SyncEngine(config) as engine:
        first, results = _timed(engine.sync_all)
        warm = [_timed(engine.sync_all)[0] for _ in range(repeat)]
    outcomes = sorted({r.outcome.value for r in results})
    heavy_imported = sorted(m for m in HEAVY_MODULES if m in sys.modules)
    import sharesync.pipelines.jobs.session as spark_module

    return {
        "import_seconds": imported,
        "first_call_seconds": first,
        "warm_call_seconds": statistics.median(warm) if warm else None,
        "warm_calls": warm,
        "outcomes": outcomes,
        "tables": len(results),
        "pysail_imported": "pysail" in sys.modules,
        "pyspark_imported": "pyspark" in sys.modules,
        "engine_started": spark_module._server is not None or bool(spark_module._sessions),
        "heavy_imported": heavy_imported,
    }


def poll(config_file: str, repeat: int) -> dict[str, object]:
    from sharesync.pipelines.run.engine import SyncEngine
    from sharesync.sync.core.config import load_config

    config = load_config(config_file)
    with SyncEngine(config) as engine:
        first, versions = _timed(engine.source_versions)
        warm = [_timed(engine.source_versions)[0] for _ in range(repeat)]
    failed = [name for name, v in versions.items() if not isinstance(v, int)]
    return {
        "tables": len(versions),
        "failed": len(failed),
        "first_error": str(versions[failed[0]]) if failed else None,
        "first_call_seconds": first,
        "warm_call_seconds": statistics.median(warm) if warm else None,
        "warm_calls": warm,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="in-process probes: no-op sync and version polling")
    parser.add_argument("probe", choices=["noop", "poll"])
    parser.add_argument("--config", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    result = noop(args.config, args.repeat) if args.probe == "noop" else poll(args.config, args.repeat)
    print(json.dumps({"probe": args.probe, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
