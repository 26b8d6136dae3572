"""Bootstrap (replace_target) and snapshot mode: the whole target replaced in one commit."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.jobs import (
    SCHEMA,
    StageFn,
    apply_append,
    apply_merge,
    apply_snapshot,
    commit_time,
    data_rows,
    delete,
    ins,
    post,
    read_target,
    replace_target,
    version_of,
)

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.errors import SchemaIncompatible, TargetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def snapshot(version: int, *ids: int) -> list[dict[str, object]]:
    return [ins(version, id=i, name=f"n{i}", score=i) for i in ids]


def test_snapshot_mode_replaces_the_target_in_one_commit(spark: SparkSession, stage: StageFn, target: str) -> None:
    assert apply_snapshot(spark, stage(snapshot(3, 1, 2, 3)), target).inserted == 3
    stats = apply_snapshot(spark, stage(snapshot(5, 2, 4)), target)
    assert (stats.inserted, stats.deleted, stats.target_version) == (2, 3, 1)
    rows = read_target(target)
    assert [x["id"] for x in rows] == [2, 4]
    assert {(x["_sharesync_version"], x["_sharesync_commit_timestamp"]) for x in rows} == {(5, commit_time(5))}
    assert DeltaTable(target).history(1)[0]["operation"] == "WRITE"  # one overwrite commit


def test_an_empty_snapshot_empties_the_target(spark: SparkSession, stage: StageFn, target: str) -> None:
    apply_snapshot(spark, stage(snapshot(1, 1, 2)), target)
    stats = apply_snapshot(spark, stage([]), target)
    assert stats.deleted == 2 and read_target(target) == []  # the schema stays
    assert "score" in [f.name for f in DeltaTable(target).schema().fields]


def test_snapshot_mode_evolves_additively_and_refuses_breaking_changes(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_snapshot(spark, stage(snapshot(1, 1)), target)
    wider = pa.schema([*SCHEMA, ("extra", pa.string())])
    stats = apply_snapshot(spark, stage([ins(2, id=1, name="a", score=1, extra="e")], wider), target)
    assert stats.added_columns == ("extra",)
    assert data_rows(target) == [{"id": 1, "name": "a", "score": 1, "extra": "e"}]
    version = version_of(target)
    with pytest.raises(SchemaIncompatible, match="'extra'"):
        apply_snapshot(spark, stage(snapshot(3, 1)), target)
    assert version_of(target) == version


def test_bootstrap_resets_a_merge_target_including_a_breaking_schema(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    apply_merge(spark, stage(snapshot(1, 1, 2)), target, keys=["id"], soft_delete=True)
    apply_merge(spark, stage([delete(2, id=1, name="n1", score=1)]), target, keys=["id"], soft_delete=True)
    narrow = pa.schema([("id", pa.int64()), ("name", pa.string())])
    stats = replace_target(spark, stage([ins(7, id=5, name="e")], narrow), target, keys=["id"], soft_delete=True)
    assert (stats.inserted, stats.deleted) == (1, 2)
    assert read_target(target) == [
        {
            "id": 5,
            "name": "e",
            "_sharesync_version": 7,
            "_sharesync_commit_timestamp": commit_time(7),
            "_sharesync_deleted": False,
        }
    ]
    # Later changes apply on top of the bootstrap's guards; older ones do not.
    apply_merge(spark, stage([post(6, id=5, name="old")], narrow), target, keys=["id"], soft_delete=True)
    apply_merge(spark, stage([post(8, id=5, name="new")], narrow), target, keys=["id"], soft_delete=True)
    assert data_rows(target) == [{"id": 5, "name": "new"}]


def test_empty_snapshot_without_a_target_does_nothing(stage: StageFn, target: str) -> None:
    def no_engine() -> SparkSession:
        raise AssertionError("nothing to write must not need the engine")

    assert replace_target(no_engine, stage([]), target).target_version is None


def test_bootstrap_never_replaces_a_delta_table_sharesync_did_not_write(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    """A user's own table at the configured target is refused, not overwritten (their data would be gone)."""
    write_deltalake(target, pa.table({"id": ["a"], "note": ["mine"]}))
    with pytest.raises(TargetError, match="not written by sharesync"):
        replace_target(spark, stage(snapshot(1, 1)), target, keys=["id"])
    with pytest.raises(TargetError, match="not written by sharesync"):
        apply_snapshot(spark, stage(snapshot(1, 1)), target)
    assert version_of(target) == 0
    assert read_rows(DeltaTable(target)).to_pylist() == [{"id": "a", "note": "mine"}]


def test_bootstrap_replaces_a_target_sharesync_wrote_in_append_mode(
    spark: SparkSession, stage: StageFn, target: str
) -> None:
    """Switching a table from append to merge mode on the same target rebuilds it."""
    apply_append(spark, stage(snapshot(1, 1, 2)), target, after_version=0)
    replace_target(spark, stage(snapshot(3, 5)), target, keys=["id"])
    assert data_rows(target) == [{"id": 5, "name": "n5", "score": 5}]
