"""``sharesync optimize`` and ``sharesync vacuum``: fewer files, the same rows, under the table's lease."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import on_both_engines

from sharesync.pipelines.targets.delta.maintenance import compact
from sharesync.pipelines.targets.health import Thresholds
from sharesync.state import open_store
from sharesync.sync.core.location import locate
from sharesync.sync.core.storage import StorageSection

pytestmark = pytest.mark.slow


def _rows(target: str) -> pa.Table:
    """Every row, read the way a deletion-vector table must be read (not ``to_pyarrow_table``)."""
    reader = QueryBuilder().register("t", DeltaTable(target)).execute("SELECT * FROM t ORDER BY id")
    return pa.table(reader)


def _files(target: str) -> set[str]:
    return {p.name for p in Path(target).glob("*.parquet")}


@on_both_engines
def test_optimize_folds_the_batches_files_and_keeps_rows_checkpoint_and_syncing(
    workspace: Workspace, cli: Callable[..., CliResult], engine: str
) -> None:
    workspace.table("m", rows=40, seed=1)
    config = workspace.config(workspace.spec("m"))
    args = ("--config", str(workspace.config_file))
    assert cli(*args, "sync").code == 0
    for seed in (2, 3):  # incremental batches, each its own commit and files
        workspace.commit("m", 3, seed=seed)
        assert cli(*args, "sync").code == 0
    target = workspace.target("m")
    rows, files = _rows(target), _files(target)
    key = config.tables[0].key
    store = open_store(config.state_store)
    checkpoint = store.get_checkpoint(key)

    done = cli(*args, "optimize", key, "--force")
    assert done.code == 0, done.err
    assert f"{key}: compacted (forced) with " in done.out
    now = DeltaTable(target)
    assert len(now.file_uris()) == 1 < len(files)
    assert _rows(target).equals(rows)
    assert store.get_checkpoint(key) == checkpoint

    healthy = cli(*args, "optimize")  # nothing to do: one file, no deletion vectors
    assert healthy.code == 0 and f"{key}: healthy, left as it is: 1 files (1 small)" in healthy.out

    workspace.commit("m", 3, seed=5)
    assert cli(*args, "sync").code == 0
    assert cli(*args, "verify", key, "--full").code == 0


def test_vacuum_removes_replaced_files_past_retention_only_when_asked(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    workspace.table("m", rows=40, seed=1)
    config = workspace.config(workspace.spec("m"))
    args = ("--config", str(workspace.config_file))
    key = config.tables[0].key
    assert cli(*args, "sync").code == 0
    workspace.commit("m", 3, seed=2)
    assert cli(*args, "sync").code == 0
    assert cli(*args, "optimize", "--force").code == 0
    target = workspace.target("m")
    live = {Path(uri).name for uri in DeltaTable(target).file_uris()}
    assert _files(target) > live  # the replaced files are still on disk

    kept = cli(*args, "vacuum")  # 168 h: nothing is that old
    assert kept.code == 0 and f"{key}: vacuumed with deltalake vacuum: removed 0 files older than 168 h" in kept.out
    refused = cli(*args, "vacuum", "--retain-hours", "0")
    assert refused.code == 2 and "add --allow-breaking-running-readers" in refused.err
    assert _files(target) > live

    done = cli(*args, "vacuum", "--retain-hours", "0", "--allow-breaking-running-readers")
    assert done.code == 0, done.err
    assert _files(target) == live
    assert cli(*args, "verify", key, "--full").code == 0


def test_maintenance_is_refused_while_a_sync_holds_the_lease(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    workspace.table("m", rows=10, seed=1)
    config = workspace.config(workspace.spec("m"))
    args = ("--config", str(workspace.config_file))
    key = config.tables[0].key
    assert cli(*args, "sync").code == 0
    files = _files(workspace.target("m"))
    with open_store(config.state_store).hold_lease(key, owner="another-sync"):
        for command in (("optimize", "--force"), ("vacuum",)):
            refused = cli(*args, *command)
            assert refused.code == 1
            assert refused.err.startswith(f"error: {key}: {key} is being synced by another-sync")
    assert _files(workspace.target("m")) == files


def test_sail_compaction_purges_deletion_vectors(tmp_path: Path, workspace: Workspace) -> None:
    """A deletion-vector table Sail wrote (the synced targets have none yet): its rewrite keeps the live rows."""
    syncer = workspace.syncer(workspace.config())
    spark: Any = syncer.resources.spark()
    path = str(tmp_path / "dv")
    spark.range(0, 400).selectExpr("id", "id * 2 AS v").repartition(4).write.format("delta").option(
        "delta.enableDeletionVectors", "true"
    ).save(path)
    spark.sql(f"DELETE FROM delta.`{path}` WHERE id % 3 = 0").collect()
    rows = _rows(path)
    done = compact(spark, locate(path, StorageSection()), Thresholds())
    assert done.before.deleted_rows == 134 and done.before.files_with_deletion_vectors == 4
    assert (done.after.deleted_rows, done.after.files, done.after.live_rows) == (0, 1, 266)
    assert done.how == "rewrite (read + overwrite)" and done.after.last_compaction is not None
    assert _rows(path).equals(rows)
