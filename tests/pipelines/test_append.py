"""Append mode: the target is the change log, each change row exactly once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from support.jobs import SCHEMA, StageFn, apply_append, apply_merge, delete, ins, post, pre, read_target, version_of

from sharesync.sync.core.errors import SchemaIncompatible, TargetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def log(target: str) -> list[tuple[int, str, int]]:
    return sorted((row["_commit_version"], row["_change_type"], row["id"]) for row in read_target(target))


def test_changes_append_exactly_once_even_when_a_committed_batch_runs_again(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    first = stage([ins(1, id=1, name="a", score=1), ins(1, id=2, name="b", score=2)])
    assert apply_append(spark, first, target, after_version=0).inserted == 2
    second = stage(
        [pre(2, id=1, name="a", score=1), post(2, id=1, name="A", score=1), delete(3, id=2, name="b", score=2)]
    )
    assert apply_append(spark, second, target, after_version=1).inserted == 3
    expected = [
        (1, "insert", 1),
        (1, "insert", 2),
        (2, "update_postimage", 1),
        (2, "update_preimage", 1),
        (3, "delete", 2),
    ]
    assert log(target) == expected

    # Crash after the append committed but before the checkpoint moved: the same batch runs again.
    again = apply_append(spark, second, target, after_version=1)
    assert again.inserted == 3 and log(target) == expected
    row = read_target(target)[0]
    assert list(row) == ["id", "name", "score", "_change_type", "_commit_version", "_commit_timestamp"]


def test_rows_at_or_below_the_checkpoint_are_never_written_twice(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_append(spark, stage([ins(1, id=1, name="a", score=1)]), target, after_version=0)
    overlapping = stage([ins(1, id=1, name="a", score=1), ins(2, id=2, name="b", score=2)])
    assert apply_append(spark, overlapping, target, after_version=1).inserted == 1
    assert log(target) == [(1, "insert", 1), (2, "insert", 2)]


def test_filter_projection_and_additive_schema(spark: SparkSession, stage: StageFn, target: str) -> None:
    from pyspark.sql import functions as F

    keep = F.col("score") > 1
    rows = [ins(1, id=1, name="a", score=1), ins(1, id=2, name="b", score=2), ins(1, id=3, name="c", score=None)]
    assert (
        apply_append(spark, stage(rows), target, after_version=0, columns=["id", "score"], row_filter=keep).inserted
        == 1
    )
    wider = pa.schema([*SCHEMA, ("extra", pa.float64())])
    batch = stage([ins(2, id=4, name="d", score=4, extra=0.5)], wider)
    stats = apply_append(spark, batch, target, after_version=1, columns=["id", "score", "extra"], row_filter=keep)
    assert stats.added_columns == ("extra",)
    assert [(x["id"], x["score"], x["extra"]) for x in read_target(target)] == [(2, 2, None), (4, 4, 0.5)]
    assert "name" not in read_target(target)[0]


def test_breaking_change_and_foreign_target_write_nothing(spark: SparkSession, stage: StageFn, target: str) -> None:
    apply_append(spark, stage([ins(1, id=1, name="a", score=1)]), target, after_version=0)
    version = version_of(target)
    narrow = pa.schema([("id", pa.int64()), ("name", pa.string())])
    with pytest.raises(SchemaIncompatible, match="'score'"):
        apply_append(spark, stage([ins(2, id=2, name="b")], narrow), target, after_version=1)
    assert version_of(target) == version

    merge_target = target + "-merge"
    apply_merge(spark, stage([ins(1, id=1, name="a", score=1)]), merge_target, keys=["id"])
    with pytest.raises(TargetError, match="_change_type"):
        apply_append(spark, stage([ins(2, id=2, name="b", score=2)]), merge_target, after_version=1)


def test_empty_batch_is_a_no_op(stage: StageFn, target: str) -> None:
    def no_engine() -> SparkSession:
        raise AssertionError("an empty batch must not need the engine")

    assert apply_append(no_engine, stage([]), target, after_version=3).rows_in_batch == 0
