"""A batch whose last version has no files stores that version's own commit time.

A metadata change (or an empty commit, or a compaction) has no change files to read its commit
timestamp from; the checkpoint must not carry an older commit's time against the new version,
which would overstate lag and freshness. The syncer asks the provider instead.
"""

from __future__ import annotations

import time

from deltalake import DeltaTable
from support.e2e import Workspace

from sharesync.pipelines.run.results import TableOutcome
from sharesync.sync.core.timestamps import from_millis


def _commit_time(path: str, version: int) -> int:
    [commit] = [c for c in DeltaTable(path).history() if c["version"] == version]
    return int(commit["timestamp"])


def test_a_metadata_only_last_version_gets_its_real_commit_time(workspace: Workspace) -> None:
    workspace.table("m", rows=20)
    config = workspace.config(workspace.spec("m", max_versions_per_batch=2))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    workspace.commit("m", 1, seed=3)  # version 1: data
    time.sleep(0.05)  # two commits in one millisecond would make the test prove nothing
    path = str(workspace.path("m"))
    DeltaTable(path).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})  # version 2

    [result] = syncer.sync_all()

    assert result.outcome is TableOutcome.SYNCED and result.checkpoint_version == 2, result.error
    assert [(b.start_version, b.end_version) for b in result.batches] == [(1, 2)]
    checkpoint = syncer.resources.store.get_checkpoint(workspace.name("m"))
    assert checkpoint is not None and checkpoint.version == 2
    assert _commit_time(path, 2) > _commit_time(path, 1)
    assert checkpoint.version_timestamp == from_millis(_commit_time(path, 2))
    assert result.batches[0].end_commit_timestamp == from_millis(_commit_time(path, 2))
