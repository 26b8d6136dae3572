"""History mode on real Sail and real Delta tables, checked with deltalake against a plain-Python model.

Every test runs twice: with the MERGE statement and with the copy-on-write rewrite. The expected
history comes from :class:`support.history.HistoryModel`, which knows nothing of the engine code.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from support.history import CURRENT, VF, VT, HistoryModel, Row, sort_history
from support.jobs import SCHEMA, StageFn, apply_merge, commit_time, delete, ins, post, pre, read_target, version_of

from sharesync.pipelines.modes.history import history_batch
from sharesync.pipelines.modes.history.history import HistoryStats
from sharesync.pipelines.targets.delta.history_rows import current_rows
from sharesync.sync.core.errors import SyncError, TargetError
from sharesync.sync.core.location import locate
from sharesync.sync.predicates import CmpOp, Comparison, Ref

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STRATEGIES = {"merge-statement": None, "rewrite": 0.0}  # rewrite_threshold: never / always rewrite
KEYS = ["id"]
COLUMNS = ["id", "name", "score"]
_threshold: float | None = None


@pytest.fixture(autouse=True, params=sorted(STRATEGIES))
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    global _threshold
    _threshold = STRATEGIES[request.param]
    yield request.param
    _threshold = None


def apply_history(*args: Any, **kwargs: Any) -> HistoryStats:
    return history_batch.apply_history(*args, keys=KEYS, rewrite_threshold=_threshold, **kwargs)


def bootstrap(*args: Any, **kwargs: Any) -> HistoryStats:
    return history_batch.bootstrap_history(*args, keys=KEYS, rewrite_threshold=_threshold, **kwargs)


def r(id: int | None, name: str | None, score: int | None) -> dict[str, Any]:
    return {"id": id, "name": name, "score": score}


def timed(rows: Sequence[Row]) -> list[Row]:
    return [{**row, "_commit_timestamp": commit_time(row["_commit_version"])} for row in rows]


def replay(model: HistoryModel, rows: Sequence[Row]) -> HistoryModel:
    """The model after ``rows``, one version at a time."""
    for v in sorted({row["_commit_version"] for row in rows}):
        model.apply_version(v, commit_time(v), timed([row for row in rows if row["_commit_version"] == v]))
    return model


def history(target: str) -> list[Row]:
    return sort_history(read_target(target), KEYS)


SNAPSHOT = [ins(1, **r(i, f"n{i}", i)) for i in range(1, 5)]
CHANGES = [
    pre(2, **r(1, "n1", 1)),
    post(2, **r(1, "one", 10)),  # update at 2, again at 4: two new rows
    delete(2, **r(2, "n2", 2)),  # delete at 2, re-insert at 3
    ins(3, **r(2, "again", 20)),
    pre(4, **r(1, "one", 10)),
    post(4, **r(1, "uno", 11)),
    ins(3, **r(5, "n5", 5)),  # insert, then delete in the same batch: a row opened and closed
    delete(5, **r(5, "n5", 5)),
    delete(4, **r(3, "n3", 3)),  # a delete and a postimage in one version: the upsert wins
    post(4, **r(3, "n3b", 3)),
    pre(5, **r(4, "n4", 4)),  # a lone preimage deletes
]


def test_each_version_of_a_batch_gives_its_own_history_row(
    spark: SparkSession, stage: StageFn, target: str, strategy: str
) -> None:
    first = bootstrap(spark, stage(SNAPSHOT), target, version=1, replace=True)
    assert (first.opened, first.closed, first.inserted) == (4, 0, 4)
    stats = apply_history(spark, stage(CHANGES, files=3), target)
    model = HistoryModel(KEYS, COLUMNS)
    model.snapshot(1, commit_time(1), timed(SNAPSHOT))
    expected = replay(model, CHANGES).sorted_rows()
    assert history(target) == expected
    assert (stats.opened, stats.closed) == (5, 6)  # 1: two rows; 2: one; 3: one; 5: opened and closed
    assert (stats.inserted, stats.updated, stats.deleted, stats.rows_in_batch) == (5, 4, 0, len(CHANGES))
    assert stats.target_version == version_of(target) == 1
    operation = DeltaTable(target).history(1)[0]["operation"]
    assert operation == ("MERGE" if strategy == "merge-statement" else "WRITE")
    assert current_rows(locate(target)) == 3  # keys 1, 2, 3 exist at version 5
    assert [(x[VF], x[VT], x[CURRENT]) for x in history(target) if x["id"] == 1] == [
        (1, 2, False),
        (2, 4, False),
        (4, None, True),
    ]


def test_reapplying_a_batch_after_a_crash_changes_nothing(spark: SparkSession, stage: StageFn, target: str) -> None:
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    batch = stage(CHANGES)
    apply_history(spark, batch, target)
    before, version = history(target), version_of(target)
    again = apply_history(spark, batch, target)
    assert (again.changed_rows, again.opened, again.closed) == (0, 0, 0)
    assert history(target) == before and version_of(target) == version


def test_a_re_bootstrap_closes_every_open_row_and_opens_the_snapshot(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    apply_history(spark, stage(CHANGES), target)
    snapshot = [ins(9, **r(1, "uno", 11)), ins(9, **r(7, "n7", 7))]
    stats = bootstrap(spark, stage(snapshot), target, version=9)
    model = replay(HistoryModel(KEYS, COLUMNS), timed(SNAPSHOT))
    model = replay(model, CHANGES)
    model.snapshot(9, commit_time(9), timed(snapshot))
    assert history(target) == model.sorted_rows()
    assert (stats.opened, stats.closed) == (2, 3)
    version = version_of(target)
    assert bootstrap(spark, stage(snapshot), target, version=9).changed_rows == 0
    assert version_of(target) == version


def test_an_empty_snapshot_closes_every_open_row(
    spark: SparkSession, stage: StageFn, target: str, tmp_path: Path
) -> None:
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(pa.Table.from_pylist([], stage_schema()), empty / "empty.parquet")
    stats = bootstrap(spark, empty, target, version=6, commit_timestamp=commit_time(6))
    assert stats.closed == 4 and current_rows(locate(target)) == 0
    assert {(x[VT], x["_sharesync_valid_to"]) for x in history(target)} == {(6, commit_time(6))}


def test_a_backfill_rewrites_history_from_its_version_and_keeps_the_rest(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    apply_history(spark, stage(CHANGES), target)
    before = history(target)
    replayed = [c for c in CHANGES if c["_commit_version"] >= 3]
    same = apply_history(spark, stage(replayed), target, replay_from=3)
    assert history(target) == before  # the same source replayed: the same history
    assert same.deleted == same.opened  # rows from version 3 on were removed and written again
    # A replay that sees other changes from version 4 (say, a filter that changed): history before 4 stays.
    other = [post(4, **r(1, "other", 0))]
    apply_history(spark, stage(other), target, replay_from=4)
    model = replay(HistoryModel(KEYS, COLUMNS), SNAPSHOT)
    model = replay(model, [c for c in CHANGES if c["_commit_version"] < 4] + other)
    assert history(target) == model.sorted_rows()


def test_untracked_changes_update_the_current_row_in_place(spark: SparkSession, stage: StageFn, target: str) -> None:
    for option in ({"track_history": ["name"]}, {"track_history_except": ["score"]}):
        path = f"{target}-{next(iter(option))}"
        bootstrap(spark, stage(SNAPSHOT), path, version=1)
        batch = [
            post(2, **r(1, "n1", 100)),  # score only: in place
            post(3, **r(1, "x", 100)),  # name: a new row
            post(4, **r(1, "x", 7)),  # score only: in place on the row opened at 3
            post(4, **r(2, "n2", 2)),  # nothing changed: no change
        ]
        stats = history_batch.apply_history(spark, stage(batch), path, keys=KEYS, rewrite_threshold=_threshold, **option)
        model = replay(HistoryModel(KEYS, COLUMNS, ["name"]), SNAPSHOT)
        assert history(path) == replay(model, batch).sorted_rows()
        assert (stats.opened, stats.closed, stats.updated) == (1, 1, 1)
        version = version_of(path)
        again = history_batch.apply_history(spark, stage(batch), path, keys=KEYS, rewrite_threshold=_threshold, **option)
        assert again.changed_rows == 0 and version_of(path) == version


def test_a_backfill_with_tracked_columns_replays_the_same_history(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    """A backfill reopens the rows closed since its version and compares the replay with their images."""
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    batch = [
        post(2, **r(1, "n1", 100)),  # score only: in place
        post(3, **r(1, None, 100)),  # name to NULL: a new row
        post(4, **r(2, "n2", 7)),  # score only: in place
        post(5, **r(2, "x", 7)),  # name: a new row
    ]
    option = {"keys": KEYS, "rewrite_threshold": _threshold, "track_history": ["name"]}
    history_batch.apply_history(spark, stage(batch), target, **option)
    before = history(target)
    assert before == replay(replay(HistoryModel(KEYS, COLUMNS, ["name"]), SNAPSHOT), batch).sorted_rows()
    for start in (2, 3, 4, 5):
        replayed = [c for c in batch if c["_commit_version"] >= start]
        history_batch.apply_history(spark, stage(replayed), target, replay_from=start, **option)
        assert history(target) == before, f"replayed from {start}"


def test_new_columns_appear_from_their_version_on(spark: SparkSession, stage: StageFn, target: str) -> None:
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    wider = pa.schema([*SCHEMA, ("extra", pa.string())])
    stats = apply_history(spark, stage([post(2, **r(1, "n1", 1), extra="x")], wider), target)
    assert stats.added_columns == ("extra",)
    rows = history(target)
    assert [(x["id"], x[VF], x["extra"]) for x in rows if x["id"] == 1] == [(1, 1, None), (1, 2, "x")]
    assert all(x["extra"] is None for x in rows if x["id"] != 1)


def test_a_new_untracked_column_updates_the_open_row_in_place(spark: SparkSession, stage: StageFn, target: str) -> None:
    # The plan reads the open rows' untracked values before the column exists in the target.
    bootstrap(spark, stage(SNAPSHOT), target, version=1)
    wider = pa.schema([*SCHEMA, ("extra", pa.string())])
    batch = stage([post(2, **r(1, "n1", 1), extra="x")], wider)
    stats = apply_history(spark, batch, target, track_history=["name", "score"])
    assert stats.added_columns == ("extra",) and (stats.opened, stats.closed, stats.updated) == (0, 0, 1)
    assert [(x[VF], x[VT], x["extra"]) for x in history(target) if x["id"] == 1] == [(1, None, "x")]


def test_a_filtered_out_image_closes_the_row(spark: SparkSession, stage: StageFn, target: str) -> None:
    small = Comparison(Ref("score", "integer"), CmpOp.LT, 50)
    bootstrap(spark, stage(SNAPSHOT), target, version=1, row_filter=small)
    apply_history(spark, stage([post(2, **r(1, "big", 99)), post(2, **r(2, "ok", 3))]), target, row_filter=small)
    model = replay(HistoryModel(KEYS, COLUMNS, keep=lambda row: row["score"] < 50), SNAPSHOT)
    assert history(target) == replay(model, [post(2, **r(1, "big", 99)), post(2, **r(2, "ok", 3))]).sorted_rows()


def test_a_null_key_has_a_history_like_any_other(spark: SparkSession, stage: StageFn, target: str) -> None:
    snapshot = [ins(1, **r(None, "null", 0)), ins(1, **r(1, "one", 1))]
    bootstrap(spark, stage(snapshot), target, version=1)
    batch = stage([post(2, **r(None, "still null", 0)), delete(3, **r(None, "still null", 0))])
    stats = apply_history(spark, batch, target)
    assert (stats.opened, stats.closed) == (1, 2)
    model = replay(replay(HistoryModel(KEYS, COLUMNS), snapshot), [post(2, **r(None, "still null", 0))])
    model = replay(model, [delete(3, **r(None, "still null", 0))])
    assert history(target) == model.sorted_rows()
    assert apply_history(spark, batch, target).changed_rows == 0


def test_a_merge_target_is_refused_until_a_replacing_bootstrap(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_merge(spark, stage(SNAPSHOT), target, keys=KEYS)
    with pytest.raises(TargetError, match="sharesync reset"):
        apply_history(spark, stage(CHANGES), target)
    stats = bootstrap(spark, stage(SNAPSHOT), target, version=1, replace=True)
    assert (stats.opened, stats.deleted) == (4, 4)
    assert all(x[VF] == 1 and x[CURRENT] for x in history(target))
    assert "_sharesync_version" not in read_target(target)[0]


def test_a_netted_batch_is_refused(spark: SparkSession, stage: StageFn, target: str) -> None:
    batch = stage(CHANGES)
    next(batch.iterdir()).rename(batch / "netted.parquet")
    with pytest.raises(SyncError, match="netted"):
        apply_history(spark, batch, target)


def stage_schema() -> pa.Schema:
    from support.jobs import CHANGE_FIELDS

    return pa.schema([*SCHEMA, *CHANGE_FIELDS])
