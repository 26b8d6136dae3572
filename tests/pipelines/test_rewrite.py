"""When ``apply_merge`` rewrites the target instead of running a MERGE, and that both agree.

The results of both strategies are compared test by test in ``test_merge.py`` (every test runs
under each); here: which one runs, seen in the target's Delta history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deltalake import DeltaTable
from support.jobs import StageFn, apply_merge, data_rows, delete, ins, post, pre, read_target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def last_operation(target: str) -> str:
    return str(DeltaTable(target).history(1)[0]["operation"])


def r(id: int, name: str, score: int) -> dict[str, Any]:
    return {"id": id, "name": name, "score": score}


def test_a_batch_small_against_the_target_merges_and_a_large_one_rewrites(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_merge(spark, stage([ins(1, **r(i, "a", i)) for i in range(10)]), target, keys=["id"])

    small = stage([pre(2, **r(1, "a", 1)), post(2, **r(1, "b", 1))])  # 1 net change: 10 % of the rows
    stats = apply_merge(spark, small, target, keys=["id"], rewrite_threshold=0.2)
    assert last_operation(target) == "MERGE"
    assert (stats.inserted, stats.updated, stats.deleted) == (0, 1, 0)

    large = stage([delete(3, **r(i, "a", i)) for i in range(2, 5)] + [ins(3, **r(20, "n", 20))])  # 4 net: 40 %
    stats = apply_merge(spark, large, target, keys=["id"], rewrite_threshold=0.2)
    assert last_operation(target) != "MERGE"  # an overwrite ("WRITE" on Delta Lake/Spark)
    assert (stats.inserted, stats.updated, stats.deleted) == (1, 0, 3)
    assert [row["id"] for row in data_rows(target)] == [0, 1, 5, 6, 7, 8, 9, 20]
    assert data_rows(target)[1] == r(1, "b", 1)


def test_a_target_with_a_column_the_batch_does_not_write_is_merged(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    """Soft delete switched off again: ``_sharesync_deleted`` stays, and a MERGE leaves it be."""
    apply_merge(spark, stage([ins(1, **r(1, "a", 1)), ins(1, **r(2, "b", 2))]), target, keys=["id"], soft_delete=True)
    apply_merge(spark, stage([delete(2, **r(2, "b", 2))]), target, keys=["id"], soft_delete=True)
    stats = apply_merge(spark, stage([post(3, **r(1, "z", 1))]), target, keys=["id"], rewrite_threshold=0.0)
    assert last_operation(target) == "MERGE"
    assert stats.updated == 1
    assert read_target(target, drop=["_sharesync_version", "_sharesync_commit_timestamp"]) == [
        {**r(1, "z", 1), "_sharesync_deleted": False},
        {**r(2, "b", 2), "_sharesync_deleted": True},
    ]


def test_a_rewrite_with_nothing_newer_makes_no_commit(spark: SparkSession, stage: StageFn, target: str) -> None:
    batch = stage([ins(1, **r(1, "a", 1)), ins(1, **r(2, "b", 2))])
    apply_merge(spark, batch, target, keys=["id"])
    version = DeltaTable(target).version()
    again = apply_merge(spark, stage([post(1, **r(1, "old", 1))]), target, keys=["id"], rewrite_threshold=0.0)
    assert again.changed_rows == 0
    assert DeltaTable(target).version() == version
