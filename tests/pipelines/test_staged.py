"""Staged batches: which files are data, and the net change per key as the engine reads it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.jobs import StageFn, delete, ins, net_as_staged, post, pre

from sharesync.pipelines.jobs.staged import count_rows, read_staged, staged_files
from sharesync.sync.core.errors import SyncError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_staged_files_follow_sparks_rule_and_skip_unfinished_files(tmp_path: Path, stage: StageFn) -> None:
    batch = stage([ins(1, id=1, name="a", score=1)])
    for junk in ("_SUCCESS", ".part-000.parquet.crc", "part-001.parquet.tmp"):
        (batch / junk).write_bytes(b"x")
    (batch / "sub").mkdir()
    assert [p.name for p in staged_files(batch)] == ["part-000.parquet"]
    assert count_rows(staged_files(batch)) == 1


def test_missing_batch_directory_is_an_error_not_an_empty_batch(tmp_path: Path) -> None:
    with pytest.raises(SyncError, match="does not exist"):
        staged_files(tmp_path / "nope")


def test_read_staged_rejects_files_without_change_columns(spark: SparkSession, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "b").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "b" / "x.parquet")
    with pytest.raises(SyncError, match="_change_type"):
        read_staged(spark, tmp_path / "b")


def test_net_change_priority_rules(spark: SparkSession, stage: StageFn) -> None:
    batch = stage(
        [
            # 1: newest version wins.
            ins(1, id=1, name="v1", score=1),
            pre(2, id=1, name="v1", score=1),
            post(2, id=1, name="v2", score=2),
            # 2: a file rewrite without CDF: removed and re-added in one version -> the add wins.
            delete(3, id=2, name="old", score=0),
            ins(3, id=2, name="new", score=0),
            # 3: a preimage whose postimage was pruned away (filtered replica) -> the preimage wins.
            pre(4, id=3, name="was", score=3),
            # 4: delete beats preimage within a version.
            pre(5, id=4, name="p", score=4),
            delete(5, id=4, name="d", score=4),
            # 5: insert then delete in a later version -> delete.
            ins(1, id=5, name="x", score=5),
            delete(6, id=5, name="x", score=5),
            # NULL keys group together.
            ins(1, id=None, name="n1", score=0),
            post(2, id=None, name="n2", score=0),
        ],
        files=3,
    )
    net_as_staged(batch, ["id"])
    net = {
        r["id"]: (r["_change_type"], r["_commit_version"], r["name"])
        for r in read_staged(spark, batch).collect()
    }
    assert net == {
        1: ("update_postimage", 2, "v2"),
        2: ("insert", 3, "new"),
        3: ("update_preimage", 4, "was"),
        4: ("delete", 5, "d"),
        5: ("delete", 6, "x"),
        None: ("update_postimage", 2, "n2"),
    }
