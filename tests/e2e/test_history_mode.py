"""History mode end to end: the real CLI against the real local server, checked against the change feed.

The expected history is rebuilt by :func:`support.history.source_history` from the provider's own
Delta log (``deltalake``'s ``load_cdf``), in plain Python — no engine code — and compared with the
target row for row, sharesync's validity columns included. Random commits (appends, updates,
deletes, merges, partition drops, re-inserts of deleted keys, untracked-only updates) land
several versions per batch, under both write strategies, with a faulty provider and a crash
between a target commit and its checkpoint.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.cli_runner import CliResult
from support.e2e import FlakyStore, Workspace
from support.engines import SAIL, SPARK, SPARK_CLUSTER, on_both_engines
from support.history import CURRENT, VF, VT, Row, assert_history_matches, commit_times, source_history
from support.verify import read_target_table, source_version

from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store
from sharesync.sync.core.timestamps import to_wire
from sharesync.sync.server.samples import sample_rows

# Every test on the embedded Sail and on Apache Spark + Delta; one history run (three passes:
# bootstrap, an untracked and a tracked change, then verify) also on a standalone Spark cluster
# of two workers.

KEYS = ["id"]
# Table "t": a projection, a filter and a tracked-column list (qty changes update in place).
T_COLUMNS = ["region", "qty", "name", "price"]
T_WHERE = [{"col": "region", "op": "in", "val": ["eu", "us"]}]


def t_keeps(row: Row) -> bool:
    return row["region"] in ("eu", "us")  # SQL: NULL IN (…) is unknown, and drops the row


def history_spec(ws: Workspace, table: str, **extra: Any) -> dict[str, Any]:
    return ws.spec(table, "history", keys=KEYS, **extra)


def sync(cli: Callable[..., CliResult], ws: Workspace, *args: str) -> CliResult:
    run = cli("--config", str(ws.config_file), "sync", *args)
    assert run.code == 0, run.out + run.err
    return run


def reinsert_deleted(path: Path, seed: int, n: int = 2) -> list[int]:
    """One commit that inserts keys again that an earlier version deleted (each opens a new row);
    returns them (none when nothing was deleted yet: then the commit inserts a new key)."""
    dt = DeltaTable(str(path))
    live = set(read_rows(dt, ["id"])["id"].to_pylist())
    feed = pa.RecordBatchReader.from_stream(dt.load_cdf(starting_version=0)).read_all()
    gone = sorted({i for i, kind in zip(feed["id"].to_pylist(), feed["_change_type"].to_pylist(), strict=True)
                   if kind == "delete"} - live)  # fmt: skip
    chosen = gone[:n] if gone else [max(live, default=0) + 1]
    write_deltalake(str(path), sample_rows(random.Random(seed), chosen), mode="append")
    return gone[:n]


def touch_untracked(path: Path, seed: int) -> None:
    """One commit changing only ``qty`` (untracked in table "t") of a few live rows."""
    ids = sorted(read_rows(DeltaTable(str(path)), ["id"])["id"].to_pylist())
    low = random.Random(seed).choice(ids)
    DeltaTable(str(path)).update(updates={"qty": "coalesce(qty, 0) + 7"}, predicate=f"id >= {low} AND id < {low + 3}")


def check(ws: Workspace, start: dict[str, int], gaps: dict[str, dict[int, int]] | None = None) -> None:
    """Both tables' targets hold exactly the history their provider's change feed gives."""
    gaps = gaps or {}
    h, t = ws.path("h"), ws.path("t")
    expected_h = source_history(h, KEYS, start=start["h"], end=source_version(h), gaps=gaps.get("h"))
    assert_history_matches(ws.target("h"), expected_h, KEYS)
    expected_t = source_history(
        t, KEYS, start=start["t"], end=source_version(t), columns=T_COLUMNS, tracked=["region", "name", "price"],
        keep=t_keeps, gaps=gaps.get("t"),
    )  # fmt: skip
    assert_history_matches(ws.target("t"), expected_t, KEYS)


@on_both_engines
@pytest.mark.parametrize("strategy", ["merge", "rewrite"])
def test_random_rounds_keep_the_change_feed_history_exactly_once(
    workspace: Workspace, cli: Callable[..., CliResult], strategy: str
) -> None:
    ws = workspace
    ws.table("h", rows=30, partitioned=True, seed=1)
    ws.table("t", rows=30, partitioned=False, seed=2)
    config = ws.config(
        history_spec(ws, "h", max_versions_per_batch=3, merge_strategy=strategy),
        history_spec(
            ws, "t", max_versions_per_batch=2, merge_strategy=strategy, columns=T_COLUMNS, where=T_WHERE,
            track_history_except=["qty"],
        ),
    )  # fmt: skip
    first = sync(cli, ws)
    assert "opened" in first.out
    start = {"h": 0, "t": 0}
    check(ws, start)
    faults = ws.server.faults
    reinserted: list[int] = []

    for round_ in range(1, 5):
        for offset, table in enumerate(("h", "t")):
            seed = 100 * round_ + offset
            ws.commit(table, 3, seed=seed)
            again = reinsert_deleted(ws.path(table), seed)
            reinserted += again if table == "h" else []
            touch_untracked(ws.path(table), seed)
            ws.commit(table, 1, seed=seed + 50)
        if round_ == 2:  # a provider having a bad day: errors, then files of the wrong length
            faults.error_rate, faults.error_status, faults.retry_after, faults.seed = 0.25, 429, 0.0, round_
        if round_ == 3:
            faults.file_size_delta, faults.budget = 5, 2
        if round_ == 4:  # the checkpoint write after a target commit fails: the batch comes again
            store = open_store(config.state_store)
            crashed = ws.syncer(config, store=FlakyStore(store, fail_on=2)).sync_all()
            assert any(r.outcome is TableOutcome.FAILED and "injected" in (r.error or "") for r in crashed)
        faulted = faults.faulted
        sync(cli, ws)
        assert round_ not in (2, 3) or faults.faulted > faulted, f"round {round_}: no fault fired"
        faults.reset()
        check(ws, start)

    # Every version of every key is there: a batch of several versions was not netted.
    rows = read_target_table(ws.target("h")).to_pylist()
    assert sum(1 for r in rows if not r[CURRENT]) > 10
    assert reinserted, "no deleted key was inserted again: the rounds prove less than they claim"
    for key in reinserted:  # a deleted key inserted again: its closed row stays, a new one opens
        mine = [r for r in rows if r["id"] == key]
        assert len(mine) >= 2 and any(not r[CURRENT] for r in mine), mine
    assert max(r[VF] for r in rows) == source_version(ws.path("h"))
    runs = open_store(config.state_store).runs_for(ws.name("h"), limit=100)
    assert any(r.end_version - r.start_version == 2 for r in runs if r.start_version is not None)


@pytest.mark.parametrize("engine", [SAIL, SPARK, SPARK_CLUSTER], indirect=True)
def test_untracked_only_changes_update_the_current_row_in_place(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    ws = workspace
    ws.table("u", rows=6, partitioned=False, seed=3)
    ws.config(history_spec(ws, "u", track_history=["name"]))
    sync(cli, ws)
    path = str(ws.path("u"))
    DeltaTable(path).update(updates={"qty": "coalesce(qty, 0) + 1", "price": "1.5"}, predicate="id = 1")  # v1
    sync(cli, ws)
    [row] = [r for r in read_target_table(ws.target("u")).to_pylist() if r["id"] == 1]
    assert (row["price"], row[VF], row[VT], row[CURRENT]) == (1.5, 0, None, True)  # changed in place

    DeltaTable(path).update(updates={"name": "'renamed'"}, predicate="id = 1")  # v2: tracked
    sync(cli, ws)
    rows = sorted((r for r in read_target_table(ws.target("u")).to_pylist() if r["id"] == 1), key=lambda r: r[VF])
    assert [(r["name"], r[VF], r[VT], r[CURRENT]) for r in rows] == [
        (rows[0]["name"], 0, 2, False),
        ("renamed", 2, None, True),
    ]
    stamps = commit_times(path)
    assert rows[1]["_sharesync_valid_from"] == rows[0]["_sharesync_valid_to"] == stamps[2]
    assert rows[0]["_sharesync_valid_from"] == stamps[0]  # the bootstrap's own commit time
    expected = source_history(path, KEYS, start=0, end=2, tracked=["name"])
    assert_history_matches(ws.target("u"), expected, KEYS)
    # verify --full compares the current rows (one per key) with the provider's snapshot.
    verified = cli("--config", str(ws.config_file), "verify", ws.name("u"), "--full")
    assert verified.code == 0 and "the target matches the provider's snapshot at version 2 (6 rows" in verified.out, (
        verified.out + verified.err
    )


@on_both_engines
def test_start_version_and_backfills_replay_the_change_feed(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    ws = workspace
    ws.table("b", rows=20, partitioned=False, seed=4)
    ws.commit("b", 6, seed=4)  # versions 1..6
    path = ws.path("b")
    ws.config(history_spec(ws, "b", start={"version": 2}, max_versions_per_batch=2))
    sync(cli, ws)
    assert_history_matches(ws.target("b"), source_history(path, KEYS, start=2, end=6), KEYS)
    stamps = commit_times(path)
    config = ("--config", str(ws.config_file))

    # Damage history from version 4 on; a backfill from 4 rewrites it and leaves what is older alone.
    DeltaTable(ws.target("b")).delete(f"{VF} >= 4")
    before = [r for r in read_target_table(ws.target("b")).to_pylist() if r[VF] < 4]
    with pytest.raises(AssertionError, match="missing"):  # the checker sees the damage
        assert_history_matches(ws.target("b"), source_history(path, KEYS, start=2, end=6), KEYS)
    run = cli(*config, "backfill", ws.name("b"), "--from", to_wire(stamps[4]))
    assert run.code == 0, run.out + run.err
    assert_history_matches(ws.target("b"), source_history(path, KEYS, start=2, end=6), KEYS)
    kept = {(r["id"], r[VF]) for r in read_target_table(ws.target("b")).to_pylist()}
    assert {(r["id"], r[VF]) for r in before} <= kept

    # From before the history's start: the snapshot there, then its changes — history reaches back.
    run = cli(*config, "backfill", ws.name("b"), "--from", to_wire(stamps[1]))
    assert run.code == 0, run.out + run.err
    assert_history_matches(ws.target("b"), source_history(path, KEYS, start=1, end=6), KEYS)

    # A full refresh from 3 rewrites history from there: every open row closes at 3, the snapshot opens.
    run = cli(*config, "backfill", ws.name("b"), "--from", to_wire(stamps[3]), "--full-refresh")
    assert run.code == 0, run.out + run.err
    assert_history_matches(ws.target("b"), source_history(path, KEYS, start=1, end=6, gaps={3: 2}), KEYS)


@on_both_engines
@pytest.mark.parametrize("emptied", [False, True], ids=["commits", "all-deleted"])
def test_a_history_gap_rebootstraps_and_closes_every_open_row_with_a_warning(
    workspace: Workspace, cli: Callable[..., CliResult], emptied: bool
) -> None:
    """``all-deleted``: the snapshot has no file to date it; rows still close at its commit time
    (a NULL time would keep them valid forever in an as-of query)."""
    ws = workspace
    ws.table("g", rows=15, partitioned=False, seed=5)
    ws.config(history_spec(ws, "g"))
    sync(cli, ws)
    if emptied:
        DeltaTable(str(ws.path("g"))).delete()
    else:
        ws.commit("g", 3, seed=5)
    ws.server.faults.history_error, ws.server.faults.budget = "version_not_found", 1

    run = sync(cli, ws)

    assert "no longer serves versions from 1" in run.out and "warning" in run.out
    latest = source_version(ws.path("g"))
    expected = source_history(ws.path("g"), KEYS, start=0, end=latest, gaps={latest: 0})
    assert_history_matches(ws.target("g"), expected, KEYS)
    rows = read_target_table(ws.target("g")).to_pylist()
    assert {r[VT] for r in rows if not r[CURRENT]} == {latest}  # closed by the snapshot, not deleted
    ws.commit("g", 2, seed=6)
    sync(cli, ws)
    expected = source_history(ws.path("g"), KEYS, start=0, end=source_version(ws.path("g")), gaps={latest: 0})
    assert_history_matches(ws.target("g"), expected, KEYS)


def test_a_table_without_change_data_feed_fails_and_writes_nothing(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    """A history built from snapshots would open and close every row at each pass, as changes that
    never happened: without the provider's change data feed the table fails (issue 40 §1.2)."""
    ws = workspace
    ws.table("n", rows=10, partitioned=False, cdf=False, seed=9)
    ws.config(history_spec(ws, "n"))
    run = cli("--config", str(ws.config_file), "sync")
    assert run.code == 1, run.out + run.err
    assert "does not publish a change data feed" in run.err and "'history' mode keeps a row history" in run.err
    assert not Path(ws.target("n")).exists()


@on_both_engines
def test_a_rolled_back_target_replays_from_its_own_high_water_mark(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    ws = workspace
    ws.table("r", rows=15, partitioned=False, seed=6)
    ws.config(history_spec(ws, "r", max_versions_per_batch=1))
    sync(cli, ws)
    ws.commit("r", 4, seed=6)
    sync(cli, ws)
    DeltaTable(ws.target("r")).restore(2)  # back to after the second batch
    ws.commit("r", 1, seed=7)

    run = sync(cli, ws)

    assert "rolled back" in run.out
    path = ws.path("r")
    assert_history_matches(ws.target("r"), source_history(path, KEYS, start=0, end=source_version(path)), KEYS)


@on_both_engines
def test_a_lost_target_is_rebuilt_and_says_its_history_is_gone(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    ws = workspace
    ws.table("l", rows=10, partitioned=False, seed=7)
    ws.config(history_spec(ws, "l"))
    sync(cli, ws)
    ws.commit("l", 2, seed=7)
    sync(cli, ws)
    import shutil

    shutil.rmtree(ws.target("l"))
    ws.commit("l", 1, seed=8)

    run = sync(cli, ws)

    latest = source_version(ws.path("l"))
    assert f"the history of its rows before version {latest} is gone" in run.out
    assert_history_matches(ws.target("l"), source_history(ws.path("l"), KEYS, start=latest, end=latest), KEYS)


@on_both_engines
def test_switching_a_target_between_merge_and_history_needs_a_reset(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    ws = workspace
    ws.table("x", rows=8, partitioned=False, seed=8)
    config = ("--config", str(ws.config_file))
    ws.config(ws.spec("x"))
    sync(cli, ws)
    for mode in ("history", "merge"):
        ws.config(history_spec(ws, "x") if mode == "history" else ws.spec("x"))
        commits = len(DeltaTable(ws.target("x")).history())
        refused = cli(*config, "sync")
        assert refused.code == 1
        # Out of history mode the history goes: only with the explicit flag (issue 40 §1.3).
        flag = " --discard-target" if mode == "merge" else ""
        assert f"Run 'sharesync reset {ws.name('x')}{flag}'" in refused.err, refused.err
        assert len(DeltaTable(ws.target("x")).history()) == commits  # nothing written
        verified = cli(*config, "verify", ws.name("x"))
        assert verified.code != 0 and f"Run 'sharesync reset {ws.name('x')}{flag}'" in verified.out + verified.err
        if flag:  # a plain reset keeps the history, and the sync refuses to replace it
            assert cli(*config, "reset", ws.name("x")).code == 0
            kept = cli(*config, "sync")
            assert kept.code == 1 and "--discard-target" in kept.err, kept.err
            assert len(DeltaTable(ws.target("x")).history()) == commits
        assert cli(*config, "reset", ws.name("x"), *flag.split()).code == 0
        sync(cli, ws)
    assert {"_sharesync_version"} <= set(read_target_table(ws.target("x")).column_names)
    assert not {VF, VT} & set(read_target_table(ws.target("x")).column_names)


@on_both_engines
def test_a_tracked_column_the_shared_table_lacks_is_a_config_error(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    ws = workspace
    ws.table("c", rows=5, partitioned=False, seed=9)
    ws.config(history_spec(ws, "c", track_history=["name", "nope"]))
    run = cli("--config", str(ws.config_file), "sync")
    assert run.code == 2, run.out + run.err
    assert f"tables[{ws.name('c')}].track_history: ['nope'] not in the shared table's columns" in run.err
    assert not Path(ws.target("c")).exists()
