"""Merge-on-read targets: new targets get deletion vectors, and an incremental MERGE copies no rows.

The provider's table is written and updated by ``deltalake`` (a writer other than sharesync); the
target by the engine under test. What a MERGE did is read from the target's own commit
(``commitInfo.operationMetrics``, written by the engine): both Sail and Delta on Apache Spark record
``numTargetRowsCopied`` and ``numTargetDeletionVectorsAdded`` for a MERGE. The rows are read back
through ``deltalake``'s QueryBuilder (:mod:`support.verify`), which honours deletion vectors.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import on_both_engines
from support.verify import assert_merge_target_matches, source_version

from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.maintenance_facts import read_health
from sharesync.pipelines.targets.delta.rows import has_deletion_vectors
from sharesync.sync.core.location import locate
from sharesync.sync.core.storage import StorageSection

DV_PROPERTY = "delta.enableDeletionVectors"
UPDATED = "id <= 3"  # a few keys of the provider's table


def _sync(workspace: Workspace, *tables: dict[str, Any], **top: Any) -> None:
    for result in workspace.syncer(workspace.config(*tables, **top)).sync_all():
        assert result.outcome is TableOutcome.SYNCED, result.error


def _update_a_few_keys(workspace: Workspace, table: str) -> None:
    DeltaTable(str(workspace.path(table))).update(updates={"name": "'changed'"}, predicate=UPDATED)


def _last_merge(target: str) -> dict[str, Any]:
    """The newest MERGE commit's ``operationMetrics``, as the engine recorded them."""
    for log in sorted((Path(target) / "_delta_log").glob("*.json"), reverse=True):
        for line in log.read_text(encoding="utf-8").splitlines():
            info = json.loads(line).get("commitInfo")
            if info is not None and info.get("operation") == "MERGE":
                return {k: int(v) for k, v in (info.get("operationMetrics") or {}).items()}
    raise AssertionError(f"no MERGE commit in {target}")


@on_both_engines
def test_a_new_target_is_merge_on_read_and_an_update_copies_no_rows(workspace: Workspace) -> None:
    path = workspace.table("m", rows=60, partitioned=False, seed=3)
    _sync(workspace, workspace.spec("m"))
    target = DeltaTable(workspace.target("m"))
    assert target.metadata().configuration.get(DV_PROPERTY) == "true"

    _update_a_few_keys(workspace, "m")
    _sync(workspace, workspace.spec("m"))
    merged = _last_merge(workspace.target("m"))
    assert merged["numTargetRowsCopied"] == 0, merged
    assert merged["numTargetDeletionVectorsAdded"] >= 1, merged
    assert merged["numTargetRowsUpdated"] == 3, merged
    assert has_deletion_vectors(DeltaTable(workspace.target("m")))
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))


@pytest.mark.parametrize("where", ["table", "defaults"])
def test_deletion_vectors_false_gives_a_copy_on_write_target(workspace: Workspace, where: str) -> None:
    path = workspace.table("m", rows=60, partitioned=False, seed=4)
    spec = workspace.spec("m", **({"deletion_vectors": False} if where == "table" else {}))
    top = {"defaults": {"deletion_vectors": False}} if where == "defaults" else {}
    _sync(workspace, spec, **top)
    assert DeltaTable(workspace.target("m")).metadata().configuration.get(DV_PROPERTY) == "false"

    _update_a_few_keys(workspace, "m")
    _sync(workspace, spec, **top)
    merged = _last_merge(workspace.target("m"))
    assert merged["numTargetRowsCopied"] > 0 and merged.get("numTargetDeletionVectorsAdded", 0) == 0, merged
    assert not has_deletion_vectors(DeltaTable(workspace.target("m")))
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))


def test_an_existing_copy_on_write_target_stays_so_when_the_default_is_on(workspace: Workspace) -> None:
    path = workspace.table("m", rows=60, partitioned=False, seed=5)
    _sync(workspace, workspace.spec("m", deletion_vectors=False))  # created copy-on-write, as before
    for round_ in range(2):
        _update_a_few_keys(workspace, "m")
        workspace.commit("m", 2, seed=50 + round_)
        _sync(workspace, workspace.spec("m", merge_strategy="merge"))  # the setting is on: for new targets only
        target = DeltaTable(workspace.target("m"))
        assert target.metadata().configuration.get(DV_PROPERTY) == "false"
        assert not has_deletion_vectors(target)
        assert _last_merge(workspace.target("m")).get("numTargetDeletionVectorsAdded", 0) == 0
        assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))


@on_both_engines
def test_optimize_merge_on_read_converts_a_copy_on_write_target_explicitly(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    path = workspace.table("m", rows=60, partitioned=False, seed=6)
    _sync(workspace, workspace.spec("m", deletion_vectors=False))  # created copy-on-write
    args = ("--config", str(workspace.config_file))
    key = workspace.name("m")

    refused = cli(*args, "optimize", key, "--merge-on-read")  # the config still says copy-on-write
    assert refused.code == 1 and "'deletion_vectors: false'" in refused.err, refused.out + refused.err
    assert DeltaTable(workspace.target("m")).metadata().configuration.get(DV_PROPERTY) == "false"

    workspace.config(workspace.spec("m"))  # the default (on) for this table now
    converted = cli(*args, "optimize", key, "--merge-on-read")
    assert converted.code == 0 and f"{key}: deletion vectors turned on" in converted.out, converted.out + converted.err
    assert DeltaTable(workspace.target("m")).metadata().configuration.get(DV_PROPERTY) == "true"

    _update_a_few_keys(workspace, "m")
    _sync(workspace, workspace.spec("m", merge_strategy="merge"))
    merged = _last_merge(workspace.target("m"))
    assert merged["numTargetRowsCopied"] == 0 and merged["numTargetDeletionVectorsAdded"] >= 1, merged
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))
    again = cli(*args, "optimize", key, "--merge-on-read")  # on already: nothing to turn on
    assert again.code == 0 and "turned on" not in again.out, again.out + again.err


# Thresholds a 60-row table reaches: any file counts as one well-sized file's worth (1 KiB), and
# rows hidden by deletion vectors call for compaction from 2 % of the rows.
def _hidden_rows(target: str) -> int:
    """Rows the target's deletion vectors hide (read from the deletion-vector files)."""
    health = read_health(locate(target, StorageSection()), small_file_bytes=1)
    assert health is not None
    return health.deleted_rows


_EAGER = {"small_file_mib": 1 / 1024, "deleted_ratio": 0.02, "small_files": 1000, "files": 1000}


@on_both_engines
def test_a_sync_compacts_its_target_after_each_batch_that_passes_a_threshold(workspace: Workspace) -> None:
    path = workspace.table("m", rows=60, partitioned=False, seed=3)
    spec = workspace.spec("m", maintenance=_EAGER, max_versions_per_batch=1)
    _sync(workspace, spec)
    # Two provider versions, two batches in one pass: 3 of the 63 rows in the target's files are
    # hidden by each batch's deletion vectors (4.8 %), so each batch is followed by a compaction.
    _update_a_few_keys(workspace, "m")
    DeltaTable(str(path)).update(updates={"name": "'again'"}, predicate="id > 3 AND id <= 6")

    [result] = workspace.syncer(workspace.config(spec)).sync_all()

    assert result.outcome is TableOutcome.SYNCED and not result.warnings, result.warnings
    assert len(result.batches) == 2 and result.compaction is not None
    done = result.compaction.split("; ")
    assert len(done) == 2 and all(d.startswith("compacted (4.8% of its rows are deleted") for d in done), done
    assert _hidden_rows(workspace.target("m")) == 0  # folded into the rewritten files
    assert result.checkpoint_version == source_version(path)
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))
    # The compaction is the target's newest commit and applied nothing: the next pass is a no-op.
    [again] = workspace.syncer(workspace.config(spec)).sync_all()
    assert again.outcome is TableOutcome.UP_TO_DATE and not again.warnings and again.compaction is None


def test_compact_off_leaves_the_deletion_vectors_for_optimize(workspace: Workspace) -> None:
    path = workspace.table("m", rows=60, partitioned=False, seed=3)
    spec = workspace.spec("m", maintenance={**_EAGER, "compact": "off"})
    _sync(workspace, spec)
    _update_a_few_keys(workspace, "m")
    [result] = workspace.syncer(workspace.config(spec)).sync_all()
    assert result.outcome is TableOutcome.SYNCED and result.compaction is None
    assert _hidden_rows(workspace.target("m")) == 3
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))


def test_a_target_smaller_than_one_well_sized_file_is_not_compacted_after_a_batch(workspace: Workspace) -> None:
    """The default thresholds: a 60-row target reads in one go, so 5 % hidden rows are left alone."""
    workspace.table("m", rows=60, partitioned=False, seed=3)
    spec = workspace.spec("m", maintenance={"deleted_ratio": 0.02})
    _sync(workspace, spec)
    _update_a_few_keys(workspace, "m")
    [result] = workspace.syncer(workspace.config(spec)).sync_all()
    assert result.outcome is TableOutcome.SYNCED and result.compaction is None
    assert _hidden_rows(workspace.target("m")) == 3


def test_sync_says_what_its_compaction_did(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    for table in ("m", "n"):
        workspace.table(table, rows=60, partitioned=False, seed=3)
    workspace.config(*(workspace.spec(t, maintenance=_EAGER) for t in ("m", "n")))
    args = ("--config", str(workspace.config_file))
    assert cli(*args, "sync").code == 0
    for table in ("m", "n"):
        _update_a_few_keys(workspace, table)
    shown = cli(*args, "sync", workspace.name("m"))
    assert shown.code == 0 and "e2e.s.m: compacted (4.8% of its rows are deleted by deletion" in shown.out, shown.out
    done = cli(*args, "sync", workspace.name("n"), "--json")
    assert done.code == 0, done.err
    [row] = [t for t in json.loads(done.out)["tables"] if t["name"] == workspace.name("n")]
    assert row["compaction"].startswith("compacted (4.8% of its rows are deleted by deletion vectors")
