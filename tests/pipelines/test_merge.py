"""Merge mode on real Sail and real Delta tables, checked with deltalake.

Every test runs twice: with the MERGE statement and with the copy-on-write rewrite
(:mod:`sharesync.pipelines.modes.merge.rewrite`) that ``apply_merge`` picks for batches large against the target.
Both must give the same tables, guards and counts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from support.engines import SAIL, SPARK
from support.jobs import (
    SCHEMA,
    T0,
    StageFn,
    apply_append,
    apply_snapshot,
    commit_time,
    data_rows,
    delete,
    ins,
    post,
    pre,
    read_target,
    replace_target,
    version_of,
)
from support.jobs import (
    apply_merge as netted_then_merged,
)

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.pipelines.targets.facts import ApplyStats
from sharesync.sync.core.errors import SchemaIncompatible, SyncError, TargetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


STRATEGIES = {"merge-statement": None, "rewrite": 0.0}  # rewrite_threshold: never / always rewrite
_threshold: float | None = None


@pytest.fixture(autouse=True, params=sorted(STRATEGIES))
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    global _threshold
    _threshold = STRATEGIES[request.param]
    yield request.param
    _threshold = None


def apply_merge(*args: Any, **kwargs: Any) -> ApplyStats:
    """The run's merge step (staging nets, then ``sharesync.pipelines.modes.merge.merge.apply_merge``) with this test's strategy."""
    stats: ApplyStats = netted_then_merged(*args, rewrite_threshold=_threshold, **kwargs)
    return stats


def r(id: int | None, name: str | None, score: int | None) -> dict[str, Any]:
    return {"id": id, "name": name, "score": score}


def test_bootstrap_then_changes_give_the_expected_table(spark: SparkSession, stage: StageFn, target: str) -> None:
    snapshot = stage([ins(1, **r(i, f"n{i}", i)) for i in range(1, 5)])
    first = apply_merge(spark, snapshot, target, keys=["id"])
    assert (first.inserted, first.updated, first.deleted, first.rows_in_batch) == (4, 0, 0, 4)

    changes = stage(
        [
            pre(2, **r(1, "n1", 1)),
            post(2, **r(1, "one", 10)),  # update
            delete(2, **r(2, "n2", 2)),  # delete
            ins(3, **r(5, "n5", 5)),  # insert
            pre(2, **r(3, "n3", 3)),
            post(2, **r(3, "x", 3)),
            delete(3, **r(3, "x", 3)),  # update, then delete
            ins(2, **r(6, "a", 6)),
            pre(3, **r(6, "a", 6)),
            post(3, **r(6, "b", 60)),  # insert, then update
        ],
        files=2,
    )
    stats = apply_merge(spark, changes, target, keys=["id"])
    assert data_rows(target) == [r(1, "one", 10), r(4, "n4", 4), r(5, "n5", 5), r(6, "b", 60)]
    assert (stats.inserted, stats.updated, stats.deleted, stats.rows_in_batch) == (2, 1, 2, 10)
    assert stats.target_version == version_of(target) == 1
    guards = {row["id"]: (row["_sharesync_version"], row["_sharesync_commit_timestamp"]) for row in read_target(target)}
    assert guards == {1: (2, commit_time(2)), 4: (1, commit_time(1)), 5: (3, commit_time(3)), 6: (3, commit_time(3))}


def test_a_rewrite_keeps_the_row_and_a_lone_preimage_deletes_it(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_merge(spark, stage([ins(1, **r(1, "a", 1)), ins(1, **r(2, "b", 2))]), target, keys=["id"])
    batch = stage([delete(2, **r(1, "a", 1)), ins(2, **r(1, "a", 1)), pre(2, **r(2, "b", 2))])
    stats = apply_merge(spark, batch, target, keys=["id"])
    assert data_rows(target) == [r(1, "a", 1)]
    assert (stats.updated, stats.deleted) == (1, 1)


def test_reapplying_a_batch_or_an_older_one_changes_nothing(
    spark: SparkSession, engine: str, stage: StageFn, target: str
) -> None:
    """Sail's MERGE that changes no row commits nothing; Delta on Spark commits a MERGE that copies
    the files holding the batch's keys, rows unchanged. Either way no row changes, and the table
    stays the one its checkpoint names (commits that leave the rows are not a rollback)."""
    apply_merge(spark, stage([ins(1, **r(i, "a", i)) for i in range(3)]), target, keys=["id"])
    older = stage([pre(2, **r(0, "a", 0)), post(2, **r(0, "old", 0))])
    batch = stage(
        [pre(3, **r(0, "a", 0)), post(3, **r(0, "new", 0)), delete(3, **r(1, "a", 1)), ins(3, **r(7, "z", 7))]
    )
    apply_merge(spark, batch, target, keys=["id"])
    after, version = read_target(target), version_of(target)

    for replay in (batch, older):  # after a crash the same batch runs again; an old one must not regress rows
        stats = apply_merge(spark, replay, target, keys=["id"])
        assert stats.changed_rows == 0
        assert read_target(target) == after
    assert data_rows(target) == [r(0, "new", 0), r(2, "a", 2), r(7, "z", 7)]
    if engine == SAIL:
        assert version_of(target) == version  # Sail commits nothing; Delta on Spark copies the touched files


def test_a_backfill_replay_overwrites_rows_at_or_after_replay_from(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_merge(
        spark, stage([ins(1, **r(1, "a", 1)), ins(4, **r(2, "b", 2)), ins(5, **r(3, "c", 3))]), target, keys=["id"]
    )
    replay = stage([post(4, **r(1, "old", 1)), post(4, **r(2, "again", 2)), delete(4, **r(3, "c", 3))])
    guarded = apply_merge(spark, replay, target, keys=["id"])
    assert (guarded.updated, guarded.deleted) == (1, 0)  # only key 1 (guard 1) is older than version 4
    stats = apply_merge(spark, replay, target, keys=["id"], replay_from=4)
    assert (stats.updated, stats.deleted) == (2, 1)  # guards 4, 4 and 5 are all >= 4: replayed
    assert [(x["id"], x["name"], x["_sharesync_version"]) for x in read_target(target)] == [
        (1, "old", 4),
        (2, "again", 4),
    ]


def test_soft_delete_flags_rows_and_counts_them_as_deletes(spark: SparkSession, stage: StageFn, target: str) -> None:
    apply_merge(spark, stage([ins(1, **r(i, "a", i)) for i in range(3)]), target, keys=["id"], soft_delete=True)
    batch = stage(
        [delete(2, **r(0, "a", 0)), pre(2, **r(1, "a", 1)), post(2, **r(1, "b", 1)), delete(2, **r(9, "x", 9))]
    )
    stats = apply_merge(spark, batch, target, keys=["id"], soft_delete=True)
    assert (stats.inserted, stats.updated, stats.deleted) == (0, 1, 1)
    flags = {
        row["id"]: (row["_sharesync_deleted"], row["_sharesync_version"], row["name"]) for row in read_target(target)
    }
    assert flags == {0: (True, 2, "a"), 1: (False, 2, "b"), 2: (False, 1, "a")}  # deleted key 9 never existed
    assert apply_merge(spark, batch, target, keys=["id"], soft_delete=True).changed_rows == 0

    revive = stage([ins(3, **r(0, "back", 0)), delete(3, **r(2, "a", 2))])
    stats = apply_merge(spark, revive, target, keys=["id"], soft_delete=True)
    assert (stats.inserted, stats.updated, stats.deleted) == (0, 1, 1)
    revived = {row["id"]: (row["_sharesync_deleted"], row["name"]) for row in read_target(target)}
    assert revived == {0: (False, "back"), 1: (False, "b"), 2: (True, "a")}


def test_soft_delete_switched_off_writes_live_rows_unflagged(spark: SparkSession, stage: StageFn, target: str) -> None:
    apply_merge(spark, stage([ins(1, **r(i, "a", i)) for i in range(3)]), target, keys=["id"], soft_delete=True)
    apply_merge(
        spark, stage([delete(2, **r(0, "a", 0)), delete(2, **r(1, "a", 1))]), target, keys=["id"], soft_delete=True
    )

    apply_merge(
        spark,
        stage([ins(3, **r(0, "back", 0)), ins(3, **r(7, "new", 7)), delete(3, **r(2, "a", 2))]),
        target,
        keys=["id"],
    )

    rows = {row["id"]: (row["_sharesync_deleted"], row["name"]) for row in read_target(target)}
    assert rows == {0: (False, "back"), 1: (True, "a"), 7: (False, "new")}  # 2: deleted; 1: flagged before


def test_soft_delete_can_be_switched_on_for_an_existing_target(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_merge(spark, stage([ins(1, **r(1, "a", 1)), ins(1, **r(2, "b", 2))]), target, keys=["id"])
    stats = apply_merge(spark, stage([delete(2, **r(1, "a", 1))]), target, keys=["id"], soft_delete=True)
    assert stats.deleted == 1
    assert {row["id"]: row["_sharesync_deleted"] for row in read_target(target)} == {1: True, 2: None}


def test_filter_deletes_rows_that_move_out_and_treats_null_as_not_true(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    from pyspark.sql import functions as F

    keep = F.col("score") > 10
    snapshot = stage(
        [ins(1, **r(1, "a", 20)), ins(1, **r(2, "b", 30)), ins(1, **r(3, "c", 5)), ins(1, **r(4, "d", None))]
    )
    assert apply_merge(spark, snapshot, target, keys=["id"], row_filter=keep).inserted == 2
    assert data_rows(target) == [r(1, "a", 20), r(2, "b", 30)]

    batch = stage(
        [
            pre(2, **r(1, "a", 20)),
            post(2, **r(1, "a", 1)),  # moves out -> deleted
            pre(2, **r(2, "b", 30)),
            post(2, **r(2, "b", None)),  # NULL is not TRUE -> deleted
            pre(2, **r(3, "c", 5)),
            post(2, **r(3, "c", 50)),  # moves in -> inserted
            pre(2, **r(4, "d", None)),
            post(2, **r(4, "d", 0)),  # stays out -> nothing
        ]
    )
    stats = apply_merge(spark, batch, target, keys=["id"], row_filter=keep)
    assert data_rows(target) == [r(3, "c", 50)]
    assert (stats.inserted, stats.updated, stats.deleted) == (1, 0, 2)


def test_projection_keeps_keys_and_filters_on_unprojected_columns(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    from pyspark.sql import functions as F

    batch = stage([ins(1, **r(1, "keep", 1)), ins(1, **r(2, "drop", 2))])
    apply_merge(spark, batch, target, keys=["id"], columns=["score"], row_filter=F.col("name") == "keep")
    assert data_rows(target) == [{"id": 1, "score": 1}]
    update = stage([pre(2, **r(1, "keep", 1)), post(2, **r(1, "keep", 11))])
    apply_merge(spark, update, target, keys=["id"], columns=["score"], row_filter=F.col("name") == "keep")
    assert data_rows(target) == [{"id": 1, "score": 11}]


def test_additive_schema_change_adds_a_nullable_column(spark: SparkSession, stage: StageFn, target: str) -> None:
    apply_merge(spark, stage([ins(1, **r(1, "a", 1)), ins(1, **r(2, "b", 2))]), target, keys=["id"])
    wider = pa.schema([*SCHEMA, ("email", pa.string())])
    batch = stage(
        [pre(2, **r(2, "b", 2), email=None), post(2, **r(2, "b", 2), email="b@x"), ins(2, **r(3, "c", 3), email="c@x")],
        wider,
    )
    stats = apply_merge(spark, batch, target, keys=["id"])
    assert stats.added_columns == ("email",)
    assert (stats.inserted, stats.updated) == (1, 1)
    assert data_rows(target) == [
        {**r(1, "a", 1), "email": None},
        {**r(2, "b", 2), "email": "b@x"},
        {**r(3, "c", 3), "email": "c@x"},
    ]
    assert apply_merge(spark, batch, target, keys=["id"]).changed_rows == 0


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param(pa.schema([("id", pa.int64()), ("name", pa.string())]), id="dropped-column"),
        # integer -> float is no type widening (integer -> long is: tests/e2e/test_type_widening.py)
        pytest.param(
            pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float32())]), id="changed-type"
        ),
    ],
)
def test_breaking_schema_change_raises_and_writes_nothing(
    spark: SparkSession, stage: StageFn, target: str, schema: pa.Schema
) -> None:
    apply_merge(spark, stage([ins(1, **r(1, "a", 1))]), target, keys=["id"])
    before, version = read_target(target), version_of(target)
    row = {name: value for name, value in r(1, "b", 2).items() if name in schema.names}
    with pytest.raises(SchemaIncompatible, match=r"'score'.*sharesync reset"):
        apply_merge(spark, stage([pre(2, **row), post(2, **row)], schema), target, keys=["id"])
    assert version_of(target) == version and read_target(target) == before


def test_composite_null_and_oddly_named_keys_are_idempotent(
    spark: SparkSession, engine: str, stage: StageFn, target: str
) -> None:
    # Delta Lake on Spark refuses a space in a column name without column mapping (next test);
    # a dot and a dash still need quoting everywhere.
    odd = "my id.x" if engine == SAIL else "my.id-x"
    schema = pa.schema([("region", pa.string()), (odd, pa.int64()), ("v", pa.string())])
    rows = [ins(1, region=None, **{odd: 1}, v="a"), ins(1, region="eu", **{odd: 1}, v="b")]
    keys = ["region", odd]
    apply_merge(spark, stage(rows, schema), target, keys=keys)
    batch = stage([pre(2, region=None, **{odd: 1}, v="a"), post(2, region=None, **{odd: 1}, v="c")], schema)
    assert apply_merge(spark, batch, target, keys=keys).updated == 1
    assert apply_merge(spark, batch, target, keys=keys).changed_rows == 0
    assert [(x["region"], x["v"]) for x in read_target(target, key="v")] == [("eu", "b"), (None, "c")]


@pytest.mark.parametrize("engine", [SPARK], indirect=True)
def test_spark_refuses_a_space_in_a_column_name_and_writes_nothing(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    """sharesync's targets use no column mapping (its checks read targets with deltalake), so a
    provider column named with a space or any of ``,;{}()=`` cannot be written by Delta on Spark:
    Delta's own error names the column, and no target appears."""
    schema = pa.schema([("id", pa.int64()), ("my id", pa.string())])
    with pytest.raises(Exception, match=r"DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES[\s\S]*my id"):
        apply_merge(spark, stage([ins(1, id=1, **{"my id": "a"})], schema), target, keys=["id"])
    assert not (Path(target) / "_delta_log").exists()


def test_merge_mode_needs_a_list_of_key_columns(spark: SparkSession, stage: StageFn, target: str) -> None:
    # That the keys and columns exist is the run's one check, against the shared schema, before
    # any download (tests/reliability/test_bad_input.py); the job only insists on having keys.
    batch = stage([ins(1, **r(1, "a", 1))])
    with pytest.raises(SyncError, match="key columns"):
        apply_merge(spark, batch, target, keys=[])
    assert not Path(target).exists()


def test_empty_batch_returns_without_starting_an_engine(stage: StageFn, target: str) -> None:
    def no_engine() -> SparkSession:
        raise AssertionError("an empty batch must not need the engine")

    assert apply_merge(no_engine, stage([]), target, keys=["id"]).changed_rows == 0
    assert not Path(target).exists()


def test_a_directory_with_other_files_is_refused_before_writing(
    spark: SparkSession, stage: StageFn, tmp_path: Path
) -> None:
    other = tmp_path / "not-delta"
    other.mkdir()
    (other / "data.csv").write_text("a,b\n")
    with pytest.raises(TargetError, match="not a Delta table"):
        apply_merge(spark, stage([ins(1, **r(1, "a", 1))]), str(other), keys=["id"])
    assert sorted(p.name for p in other.iterdir()) == ["data.csv"]
    file_target = tmp_path / "file"
    file_target.write_text("x")
    with pytest.raises(TargetError, match="is a file"):
        apply_merge(spark, stage([ins(1, **r(1, "a", 1))]), str(file_target), keys=["id"])


@pytest.mark.parametrize("mode", ["merge", "snapshot", "append"])
def test_data_files_of_a_first_write_killed_before_its_commit_do_not_block_the_next_attempt(
    spark: SparkSession, stage: StageFn, target: str, mode: str
) -> None:
    """Delta writers write data files first and the log last: a sync killed in between leaves
    ``region=eu/part-….parquet`` (and a temporary ``…#1``) without ``_delta_log``."""
    leftovers = Path(target) / "region=eu"
    leftovers.mkdir(parents=True)
    (leftovers / "part-00001-7b589b05-3c5e-4669-b08c-29aa9fe0b8e5-c000.snappy.parquet").write_bytes(b"PAR1")
    (leftovers / "part-00001-31ce6afa-a9f4-4419-8d75-dfd730dee859-c000.snappy.parquet#1").write_bytes(b"PAR1")
    batch = stage([ins(1, **r(1, "a", 1))])
    if mode == "merge":
        apply_merge(spark, batch, target, keys=["id"])
    elif mode == "snapshot":
        apply_snapshot(spark, batch, target)
    else:
        apply_append(spark, batch, target, after_version=0)
    assert [x["id"] for x in read_target(target)] == [1]


def test_a_finished_parquet_dataset_is_not_taken_for_leftovers(
    spark: SparkSession, stage: StageFn, tmp_path: Path
) -> None:
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "part-00000-7b589b05-3c5e-4669-b08c-29aa9fe0b8e5-c000.snappy.parquet").write_bytes(b"PAR1")
    (dataset / "_SUCCESS").write_bytes(b"")
    with pytest.raises(TargetError, match="not a Delta table"):
        apply_merge(spark, stage([ins(1, **r(1, "a", 1))]), str(dataset), keys=["id"])
    assert sorted(p.name for p in dataset.iterdir())[0] == "_SUCCESS"


def test_a_path_the_engine_would_misplace_is_refused(spark: SparkSession, stage: StageFn, tmp_path: Path) -> None:
    with pytest.raises(TargetError, match="' '"):
        apply_merge(spark, stage([ins(1, **r(1, "a", 1))]), str(tmp_path / "with space"), keys=["id"])
    assert not (tmp_path / "with space").exists()


def test_a_delta_table_sharesync_did_not_write_is_refused(spark: SparkSession, stage: StageFn, target: str) -> None:
    from deltalake import write_deltalake  # an independent writer: no sharesync columns

    write_deltalake(target, pa.table({"id": [1], "name": ["a"], "score": pa.array([1], pa.int32())}))
    with pytest.raises(TargetError, match="_sharesync_version"):
        apply_merge(spark, stage([ins(1, **r(2, "b", 2))]), target, keys=["id"])
    assert version_of(target) == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_an_unwritable_target_is_refused(spark: SparkSession, stage: StageFn, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(TargetError, match="not writable"):
            apply_merge(spark, stage([ins(1, **r(1, "a", 1))]), str(locked / "t"), keys=["id"])
    finally:
        locked.chmod(0o700)


ALL_TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("s", pa.int16()),
        ("b", pa.int8()),
        ("d", pa.float64()),
        ("f", pa.float32()),
        ("dec", pa.decimal128(10, 2)),
        ("str", pa.string()),
        ("flag", pa.bool_()),
        ("day", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("bin", pa.binary()),
    ]
)


def test_every_type_round_trips_with_nulls(spark: SparkSession, stage: StageFn, target: str) -> None:
    full: dict[str, Any] = {
        "i": -(2**31),
        "s": -(2**15),
        "b": -128,
        "d": 1.5,
        "f": 0.25,
        "dec": Decimal("12345678.90"),
        "str": "ü✓",
        "flag": True,
        "day": date(1999, 12, 31),
        "ts": T0,
        "bin": b"\x00\xff",
    }
    rows = [{"id": 1, **full}, {"id": 2, **{k: None for k in full}}, {"id": None, **full}]
    apply_merge(spark, stage([ins(1, **row) for row in rows], ALL_TYPES), target, keys=["id"])
    swapped = [{"id": 1, **{k: None for k in full}}, {"id": 2, **full}]
    batch = stage([post(2, **row) for row in swapped], ALL_TYPES)
    assert apply_merge(spark, batch, target, keys=["id"]).updated == 2

    table = read_rows(DeltaTable(target))
    for field in ALL_TYPES:
        assert table.schema.field(field.name).type == field.type, field.name
    assert data_rows(target) == [{"id": None, **full}, *swapped]


def test_a_column_the_engine_cannot_add_fails_loudly(
    spark: SparkSession, engine: str, stage: StageFn, target: str
) -> None:
    """Sail's mergeSchema silently adds nothing to a table with a NOT NULL column: say so, do not
    lose data. Delta on Spark writes every column nullable, so there the column is added."""
    strict = pa.schema([pa.field("id", pa.int64(), nullable=False), *list(SCHEMA)[1:]])
    apply_merge(spark, stage([ins(1, **r(1, "a", 1))], strict), target, keys=["id"])
    wider = pa.schema([*strict, ("email", pa.string())])
    batch = stage([ins(2, **r(2, "b", 2), email="b@x")], wider)
    if engine == SAIL:
        assert '"nullable":false' in DeltaTable(target).schema().to_json().replace(" ", "")
        with pytest.raises(SchemaIncompatible, match=r"could not add the new column\(s\) \['email'\].*sharesync reset"):
            apply_merge(spark, batch, target, keys=["id"])
        assert [row["id"] for row in data_rows(target)] == [1]
    else:
        assert '"nullable":false' not in DeltaTable(target).schema().to_json().replace(" ", "")
        apply_merge(spark, batch, target, keys=["id"])
        assert [(row["id"], row["email"]) for row in data_rows(target)] == [(1, None), (2, "b@x")]


def test_a_nan_beside_equal_values_survives_later_batches(spark: SparkSession, stage: StageFn, target: str) -> None:
    """Sail reads a float column as a constant when its file statistics say min == max, and
    writers leave NaN out of those (tests/pipelines/test_spark.py pins it): targets keep
    statistics only up to their first float column, so an update of another row leaves the NaN
    where it is."""
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("name", pa.string())])
    nan = float("nan")
    apply_merge(
        spark, stage([ins(1, id=1, x=nan, name="a"), ins(1, id=2, x=2.0, name="b")], schema), target, keys=["id"]
    )
    apply_merge(spark, stage([post(2, id=2, x=2.0, name="B")], schema), target, keys=["id"])
    rows = read_target(target)
    assert [(r["id"], r["name"]) for r in rows] == [(1, "a"), (2, "B")]
    assert rows[0]["x"] != rows[0]["x"] and rows[1]["x"] == 2.0  # NaN is still NaN
    assert DeltaTable(target).metadata().configuration.get("delta.dataSkippingNumIndexedCols") == "1"  # id only


def test_a_nan_key_is_one_key(spark: SparkSession, stage: StageFn, target: str) -> None:
    """Spark SQL (and Sail) take NaN for equal to NaN: an update of a NaN key updates its row."""
    schema = pa.schema([("k", pa.float64()), ("name", pa.string())])
    nan = float("nan")
    apply_merge(spark, stage([ins(1, k=nan, name="a"), ins(1, k=1.0, name="b")], schema), target, keys=["k"])
    apply_merge(spark, stage([pre(2, k=nan, name="a"), post(2, k=nan, name="A")], schema), target, keys=["k"])
    rows = read_target(target, key="name")
    assert [(r["name"], r["k"] != r["k"]) for r in rows] == [("A", True), ("b", False)]


def test_a_soft_delete_flags_each_row_of_a_key_the_target_holds_twice_once(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    """A provider whose snapshot repeats a key (the keys_unique check says so) bootstraps both
    rows; a delete then flags both — the rewrite as the MERGE does, never doubling them."""
    replace_target(
        spark, stage([ins(1, **r(1, "a", 1)), ins(1, **r(1, "b", 2))]), target, keys=["id"], soft_delete=True
    )
    apply_merge(spark, stage([delete(2, **r(1, "a", 1))]), target, keys=["id"], soft_delete=True)
    rows = read_target(target, key="name")
    assert [(r["name"], r["_sharesync_deleted"], r["_sharesync_version"]) for r in rows] == [
        ("a", True, 2),
        ("b", True, 2),
    ]
