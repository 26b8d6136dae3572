"""The table-count benchmark's pure parts: its options and the config it writes for N tables.

The measurement itself (servers, child processes) is a long run, not a test; this keeps the parts
a typo would break — quick harness checks included — within the fast lane.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from sharesync.sync.core.config import load_config

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tc() -> ModuleType:
    """``bench`` is a top-level directory of the repository, not installed: importable from its root
    (``tests/`` on the path makes ``tests/bench`` a namespace package of the same name)."""
    if sys.path[:1] != [str(REPO)]:
        sys.path.insert(0, str(REPO))
    if getattr(sys.modules.get("bench"), "__file__", "") is None:
        del sys.modules["bench"]
    return importlib.import_module("bench.table_count")


def test_defaults_cover_the_issue_counts_and_both_stores(tc: ModuleType) -> None:
    args = tc.parse_args([])
    assert args.tables == [100, 1000, 3000]
    assert args.stores == ["sqlite", "postgres"]
    assert (args.runs, args.changed, args.rows) == (3, 50, 1000)


def test_quick_check_clamps_the_changed_tables_to_the_smallest_count(tc: ModuleType) -> None:
    args = tc.parse_args(["--tables", "20", "--runs", "1", "--stores", "sqlite"])
    assert (args.tables, args.runs, args.changed, args.stores) == ([20], 1, 20, ["sqlite"])


def test_rejects_a_count_of_zero(tc: ModuleType) -> None:
    with pytest.raises(SystemExit):
        tc.parse_args(["--tables", "0"])


def test_config_for_n_tables_loads_and_names_each_table_and_target_once(tc: ModuleType, tmp_path: Path) -> None:
    names = tc.table_names(1000)
    assert names[0] == "t0000" and names[-1] == "t0999" and len(set(names)) == 1000
    profile = tmp_path / "main.share"
    profile.write_text('{"shareCredentialsVersion": 1, "endpoint": "http://127.0.0.1:1/", "bearerToken": "x"}')
    raw = tc.config_dict(tmp_path, profile, names, f"sqlite:///{tmp_path / 'state.db'}")
    (tmp_path / "sharesync.yaml").write_text(yaml.safe_dump(raw))

    config = load_config(str(tmp_path / "sharesync.yaml"))

    assert [t.name for t in config.tables] == [f"bench.sales.{n}" for n in names]
    assert len({t.target for t in config.tables}) == 1000
    assert {t.mode for t in config.tables} == {"merge"}


def test_a_postgres_store_gets_a_database_per_run_directory(tc: ModuleType, tmp_path: Path) -> None:
    store = tc.Store("postgres", "postgresql+psycopg://postgres@127.0.0.1:5999")
    assert store.url(tmp_path, "n100_postgres") == "postgresql+psycopg://postgres@127.0.0.1:5999/n100_postgres"
    assert tc.Store("sqlite", None).url(tmp_path, "x") == f"sqlite:///{tmp_path / 'state.db'}"
