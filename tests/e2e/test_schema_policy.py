"""Schema-change policies end to end: ``on_new_column`` and ``on_breaking_change`` in merge, append
and history mode, through the real CLI and local server.

Provider changes: a new column, a dropped one and a retyped one are written by ``deltalake``
(as in :mod:`test_schema`); the rename is a crafted ``metaData`` commit on a column-mapping
table Sail wrote (:func:`support.feature_tables.rename_column`: no available writer renames a
column — Sail has no ALTER TABLE, ``deltalake`` none either and writes column-mapping tables
wrongly), followed by a Sail append so the batch holds data. Sources are read back with Sail
(``deltalake`` cannot read a column-mapping change feed), targets with ``deltalake``.

Sail only, but for one rebuild on both engines (each Apache Spark case costs tens of seconds).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from operator import itemgetter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import BOTH, SAIL
from support.feature_tables import (
    cdf_paused,
    create_source,
    feature_rows,
    latest_version,
    read_source,
    read_target,
    rename_column,
)
from support.history import assert_history_matches, source_history
from support.schema_changes import add_column, drop_column, retype_column
from support.spark import get_spark
from support.verify import assert_append_target_matches, assert_merge_target_matches, source_version

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store

MODES = ("merge", "append", "history")
# table: (the column the change removes or retypes, the change)
BREAKING = {"renamed": "qty", "dropped": "qty", "retyped": "small"}
CHANGE = ("_change_type", "_commit_version")


def spec(ws: Workspace, table: str, mode: str, **extra: Any) -> dict[str, Any]:
    return ws.spec(table, mode, **({"keys": ["id"]} if mode == "history" else {}), **extra)


def sync(cli: Callable[..., CliResult], ws: Workspace) -> CliResult:
    return cli("--config", str(ws.config_file), "sync")


def checkpoints(ws: Workspace) -> dict[str, int]:
    store = open_store(f"sqlite:///{ws.root / 'state' / 'state.db'}")
    return {c.name.rsplit(".", 1)[1]: c.version for c in store.list_checkpoints()}


def last_note(ws: Workspace, table: str) -> str:
    store = open_store(f"sqlite:///{ws.root / 'state' / 'state.db'}")
    return store.latest_runs([ws.name(table)])[ws.name(table)].note or ""


# ---------------------------------------------------------------- on_new_column


@pytest.mark.parametrize("mode", MODES)
def test_a_new_provider_column_is_added_ignored_or_fails_as_configured(
    workspace: Workspace, mode: str, cli: Callable[..., CliResult]
) -> None:
    policies = ("add", "ignore", "fail")
    for seed, policy in enumerate(policies):
        workspace.table(policy, rows=12, seed=seed)
    workspace.config(*(spec(workspace, p, mode, on_new_column=p) for p in policies))
    assert sync(cli, workspace).code == 0
    first = checkpoints(workspace)
    old_names = DeltaTable(str(workspace.path("add"))).schema().to_arrow().names
    for seed, policy in enumerate(policies):
        workspace.commit(policy, 2, seed=seed)
        add_column(str(workspace.path(policy)), seed)

    run = sync(cli, workspace)

    assert run.code == 1, run.out + run.err
    [error] = [line for line in run.err.splitlines() if line.startswith("error:")]
    assert f"{workspace.name('fail')}:" in error and "['note']" in error and "on_new_column is 'fail'" in error
    assert checkpoints(workspace)["fail"] == first["fail"]
    assert "note" not in DeltaTable(workspace.target("fail")).schema().to_arrow().names
    warning = "on_new_column is 'ignore': the provider's new column(s) ['note'] are left out of the target"
    assert warning in run.out + run.err and warning in last_note(workspace, "ignore")
    assert "note" in DeltaTable(workspace.target("add")).schema().to_arrow().names

    later = DeltaTable(str(workspace.path("ignore")))  # later batches leave it out too
    later.update(updates={"note": "'later'", "qty": "qty + 1"}, predicate="id <= 5")
    DeltaTable(str(workspace.path("ignore"))).delete("id = 6")
    again = sync(cli, workspace)
    assert again.code == 1  # 'fail' still stops
    assert warning not in again.out + again.err and warning not in last_note(workspace, "ignore")  # said once
    assert "note" not in DeltaTable(workspace.target("ignore")).schema().to_arrow().names
    for policy, columns in (("add", None), ("ignore", old_names)):
        path, target = workspace.path(policy), workspace.target(policy)
        assert checkpoints(workspace)[policy] == source_version(path)
        if mode == "merge":
            assert_merge_target_matches(path, target, ["id"], source_version(path), columns=columns)
        elif mode == "append":
            assert_append_target_matches(
                path, target, bootstrap_version=first[policy], end_version=source_version(path), columns=columns
            )
        else:
            expected = source_history(path, ["id"], start=first[policy], end=source_version(path), columns=columns)
            assert_history_matches(target, expected, ["id"])


# ---------------------------------------------------------------- on_breaking_change


def _providers(ws: Workspace, tables: dict[str, str] = BREAKING) -> None:
    if "renamed" in tables:
        create_source(get_spark(), ws.path("renamed"), dvs=False, mapping=True, partitioned=False, rows=12, seed=1)
    for seed, table in enumerate(("dropped", "retyped")):
        if table in tables:
            ws.table(table, rows=12, partitioned=False, seed=2 + seed)


def _break(ws: Workspace, tables: dict[str, str] = BREAKING) -> None:
    if "renamed" in tables:
        rename_column(ws.path("renamed"), "qty", "quantity")
        _append_renamed(ws.path("renamed"), tmp=ws.root)
    if "dropped" in tables:
        drop_column(str(ws.path("dropped")))
    if "retyped" in tables:
        retype_column(str(ws.path("retyped")))


def _append_renamed(path: Path, tmp: Path) -> None:
    """A Sail append in the renamed schema, so the batch after the rename holds data."""
    rows = feature_rows(random.Random(4), [100, 101])
    rows = rows.rename_columns(["quantity" if name == "qty" else name for name in rows.column_names])
    file = tmp / "renamed-rows.parquet"  # through parquet: Sail reads a zone-less timestamp as timestamp_ntz
    pq.write_table(rows, file)
    with cdf_paused(path):
        get_spark().read.parquet(str(file)).write.format("delta").mode("append").save(str(path))


@pytest.mark.parametrize("mode", MODES)
def test_a_breaking_change_set_to_fail_stops_the_table_and_writes_nothing(
    workspace: Workspace, mode: str, cli: Callable[..., CliResult]
) -> None:
    _providers(workspace)
    workspace.config(*(spec(workspace, t, mode) for t in BREAKING))  # on_breaking_change: fail, the default
    assert sync(cli, workspace).code == 0
    before = checkpoints(workspace)
    versions = {t: DeltaTable(workspace.target(t)).version() for t in BREAKING}
    _break(workspace)

    run = sync(cli, workspace)

    assert run.code == 1
    assert checkpoints(workspace) == before
    assert {t: DeltaTable(workspace.target(t)).version() for t in BREAKING} == versions
    for table, column in BREAKING.items():
        line = next(x for x in run.err.splitlines() if x.startswith(f"error: {workspace.name(table)}:"))
        assert "breaking schema change" in line and f"'{column}'" in line and "on_breaking_change: rebuild" in line


def _rebuild(ws: Workspace, mode: str, cli: Callable[..., CliResult], tables: dict[str, str] = BREAKING) -> None:
    _providers(ws, tables)
    ws.config(*(spec(ws, t, mode, on_breaking_change="rebuild") for t in tables))
    assert sync(cli, ws).code == 0
    before = checkpoints(ws)
    rows_before = {t: read_rows(DeltaTable(ws.target(t))).num_rows for t in tables}
    _break(ws, tables)

    run = sync(cli, ws)

    assert run.code == 0, run.out + run.err
    spark = get_spark()
    for table, column in tables.items():
        path, target = ws.path(table), ws.target(table)
        latest = latest_version(path)
        assert checkpoints(ws)[table] == latest
        assert f"'{column}'" in last_note(ws, table) and "on_breaking_change is 'rebuild'" in last_note(ws, table)
        snapshot = read_source(spark, path, latest)
        names = sorted(snapshot.column_names)
        if mode in ("merge", "snapshot"):
            _assert_rows(read_target(target), snapshot)
        elif mode == "append":
            log = read_target(target)
            assert sorted(log.column_names) == sorted([*names, *CHANGE, "_commit_timestamp"])
            rebuilt = log.filter(pc.field("_commit_version") > before[table])
            assert set(rebuilt["_change_type"].to_pylist()) == {"insert"}
            assert set(rebuilt["_commit_version"].to_pylist()) == {latest}
            _assert_rows(rebuilt.select(names), snapshot)
            kept = log.filter(pc.field("_commit_version") <= before[table])
            assert kept.num_rows == rows_before[table]  # the log before stays, in the new schema
            _assert_moved(kept, table)
        else:
            _assert_rows(read_target(target, current=True), snapshot)
            everything = read_target(target)
            assert everything.num_rows == rows_before[table] + snapshot.num_rows  # every open row closed
            closed = read_rows(DeltaTable(target), where='NOT "_sharesync_is_current"')
            assert set(closed["_sharesync_valid_to_version"].to_pylist()) == {latest}
            _assert_moved(closed, table)


def _assert_rows(actual: pa.Table, expected: pa.Table) -> None:
    assert sorted(actual.column_names) == sorted(expected.column_names)
    names = expected.column_names
    key = itemgetter("id")
    assert sorted(actual.select(names).to_pylist(), key=key) == sorted(expected.to_pylist(), key=key)


def _assert_moved(rows: pa.Table, table: str) -> None:
    """Rows from before a rebuild: the old column gone, a retyped one NULL, a renamed one NULL."""
    if table == "retyped":
        assert rows["small"].null_count == rows.num_rows and pa.types.is_string(rows.schema.field("small").type)
    else:
        assert "qty" not in rows.column_names
    if table == "renamed":
        assert rows["quantity"].null_count == rows.num_rows


@pytest.mark.parametrize("mode", ["merge", "append", "snapshot"])
def test_a_breaking_change_set_to_rebuild_rebootstraps_with_the_new_schema(
    workspace: Workspace, mode: str, cli: Callable[..., CliResult]
) -> None:
    _rebuild(workspace, mode, cli)


@pytest.mark.parametrize("engine", BOTH, indirect=True)
def test_history_rebuild_closes_every_open_row_and_opens_the_snapshot_in_the_new_schema(
    workspace: Workspace, engine: str, cli: Callable[..., CliResult]
) -> None:
    # On Apache Spark, the retyped table only: the one the engines write differently (its NULLed
    # column), and each table costs tens of seconds there.
    _rebuild(workspace, "history", cli, BREAKING if engine == SAIL else {"retyped": "small"})
