"""Crashes part-way through a pass: the checkpoint tells the truth, and the next pass repairs all.

Two crash points per batch matter: before the target commit (the engine fails to start a job)
and after it (the checkpoint cannot be written). After the second kind the next pass resumes
from what the target's commit recorded (docs/guarantees.md, "Losing the state store") instead
of applying the batch again, and every row must land exactly once — on the local disk, and
with the targets and staging in S3.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from support.e2e import Workspace
from support.engines import SAIL, on_both_engines
from support.s3 import S3Workspace
from support.spark import get_spark
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.run.results import TableOutcome
from sharesync.state import StateStore, open_store
from sharesync.sync.core.config import SharesyncConfig
from sharesync.sync.core.errors import SharesyncError, StateStoreUnavailable, SyncError

pytestmark = on_both_engines  # embedded Sail and Apache Spark + Delta


class FlakySpark:
    """A Spark factory of ``config``'s engine whose ``fail_on``-th job fails to start.

    A remote engine is asked once more, first: the probe that it reads the staging directory."""

    def __init__(self, fail_on: int, config: SharesyncConfig) -> None:
        self.calls = 0
        self.config = config.spark
        self.fail_on = fail_on + (1 if config.spark.remote else 0)

    def __call__(self) -> Any:
        self.calls += 1
        if self.calls == self.fail_on:
            raise SyncError("injected: the engine went away")
        return get_spark(self.config)


class ThreadRecordingSpark:
    """A Spark factory that records the thread of each call and may fail them (an engine that cannot start)."""

    def __init__(self, *, fail: bool = False, config: SharesyncConfig | None = None) -> None:
        self.threads: list[str] = []
        self.fail = fail
        self.config = config.spark if config is not None else None

    def __call__(self) -> Any:
        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise SyncError("injected: the engine could not start")
        return get_spark(self.config)


class DyingSession:
    """A Spark factory that stops the real session it hands to the first job after ``written``
    became a Delta table: the engine dies under the next table, which meets Spark Connect's own
    error (``NO_ACTIVE_SESSION``), not one of ours. (A bootstrap's early start, in its own
    thread, gets a live session: the job's own call is the one that finds it dead.)"""

    def __init__(self, written: str) -> None:
        self.written = Path(written)
        self.killed = False

    def __call__(self) -> Any:
        session = get_spark()
        in_job = threading.current_thread().name != "sharesync-engine-start"
        if in_job and not self.killed and (self.written / "_delta_log").is_dir():
            self.killed = True
            session.stop()
        return session


class FlakyStore:
    """A state store whose ``fail_on``-th checkpoint write fails after the target committed."""

    def __init__(self, store: StateStore, fail_on: int) -> None:
        self._store = store
        self.writes = 0
        self.fail_on = fail_on

    def advance_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.writes == self.fail_on:
            raise StateStoreUnavailable("injected: the state store went away")
        return self._store.advance_checkpoint(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class StagingWatchingStore:
    """A state store that counts the staged files on disk whenever a checkpoint moves."""

    def __init__(self, store: StateStore, staging: Path) -> None:
        self._store = store
        self.staging = staging
        self.staged_at_advance: list[int] = []

    def advance_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        self.staged_at_advance.append(sum(1 for p in self.staging.rglob("*") if p.is_file()))
        return self._store.advance_checkpoint(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_batch_is_off_the_disk_before_its_checkpoint_moves(workspace: Workspace) -> None:
    # A process killed once the checkpoint moved would otherwise leave the batch's files for
    # good: no later run stages a batch that is done (tests/reliability/test_crashes.py).
    workspace.table("m", rows=30, seed=5)
    workspace.table("s", rows=30, seed=6)
    config = workspace.config(workspace.spec("m", max_versions_per_batch=2), workspace.spec("s", "snapshot"))
    watching = StagingWatchingStore(open_store(config.state_store), Path(str(config.staging_dir)))
    workspace.syncer(config, store=watching).sync_all(parallel=1)  # bootstraps
    workspace.commit("m", 4, seed=7)
    workspace.commit("s", 1, seed=8)
    workspace.syncer(config, store=watching).sync_all(parallel=1)  # m: two change batches; s: a snapshot
    assert len(watching.staged_at_advance) == 5
    assert watching.staged_at_advance == [0] * len(watching.staged_at_advance)


@pytest.mark.parametrize("crash", ["before-commit", "after-commit"])
def test_a_crash_mid_pass_keeps_the_last_batch_and_the_next_pass_finishes(workspace: Workspace, crash: str) -> None:
    _crash_mid_pass(workspace, crash)


def test_a_crash_mid_pass_with_targets_in_s3_lands_every_row_once(s3_workspace: S3Workspace) -> None:
    _crash_mid_pass(s3_workspace, "after-commit", s3_workspace.store.options())


def _crash_mid_pass(workspace: Workspace, crash: str, storage_options: dict[str, str] | None = None) -> None:
    workspace.table("m", rows=30, seed=5)
    workspace.table("a", rows=30, seed=6)
    config = workspace.config(
        workspace.spec("m", max_versions_per_batch=2), workspace.spec("a", "append", max_versions_per_batch=2)
    )
    workspace.syncer(config).sync_all()  # bootstrap at version 0
    for seed, table in enumerate(("m", "a")):
        workspace.commit(table, 6, seed=30 + seed)  # versions 1..6: three batches each

    store = open_store(config.state_store)
    if crash == "before-commit":
        flaky = workspace.syncer(config, spark=FlakySpark(fail_on=3, config=config))  # m: batches 1, 2 pass; 3 fails
    else:
        flaky = workspace.syncer(config, store=FlakyStore(store, fail_on=2))  # m: batch 2 wrote, no checkpoint
    results = {r.name: r for r in flaky.sync_all(parallel=1)}  # m before a: the injected failure hits m

    failed = results[workspace.name("m")]
    assert failed.outcome is TableOutcome.FAILED and "injected" in (failed.error or "")
    kept = 4 if crash == "before-commit" else 2
    assert store.get_checkpoint(workspace.name("m")).version == kept  # type: ignore[union-attr]
    runs = sorted(store.runs_for(workspace.name("m")), key=lambda r: r.id)
    assert runs[-1].status.value == "failed" and "injected" in (runs[-1].error or "")
    assert all(r.status.value == "succeeded" for r in runs[:-1])

    results = {r.name: r for r in workspace.syncer(config).sync_all()}

    # The other table was not held up by the crash: it finished in the first pass.
    assert results[workspace.name("a")].outcome is TableOutcome.UP_TO_DATE
    assert results[workspace.name("m")].outcome is TableOutcome.SYNCED
    resumed = results[workspace.name("m")]
    if crash == "before-commit":
        assert resumed.first_version == kept + 1 and not resumed.warnings
    else:  # batch 2 (versions 3..4) is a copy-on-write rewrite here: its commit recorded version 4
        assert resumed.first_version == 5
        assert any("records source version 4 as applied" in w for w in resumed.warnings)
    m, a = workspace.path("m"), workspace.path("a")
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m), storage_options=storage_options)
    assert_append_target_matches(
        a, workspace.target("a"), bootstrap_version=0, end_version=source_version(a), storage_options=storage_options
    )


def test_an_append_batch_repeated_after_its_commit_lands_once(workspace: Workspace) -> None:
    workspace.table("a", rows=20, seed=8)
    config = workspace.config(workspace.spec("a", "append"))
    workspace.syncer(config).sync_all()
    workspace.commit("a", 3, seed=9)
    store = open_store(config.state_store)

    result = workspace.syncer(config, store=FlakyStore(store, fail_on=1)).sync_all()[0]
    assert result.outcome is TableOutcome.FAILED
    assert store.get_checkpoint(workspace.name("a")).version == 0  # type: ignore[union-attr]
    again = workspace.syncer(config).sync_all()[0]  # resumed from the append's record: nothing applied twice
    assert again.outcome is TableOutcome.UP_TO_DATE and again.checkpoint_version == source_version(workspace.path("a"))
    assert any("resumes from there" in w for w in again.warnings)

    a = workspace.path("a")
    assert_append_target_matches(a, workspace.target("a"), bootstrap_version=0, end_version=source_version(a))


def test_a_spark_failure_fails_only_its_table_and_the_next_table_gets_a_new_session(workspace: Workspace) -> None:
    for seed, table in enumerate(("m", "a", "s")):
        workspace.table(table, rows=20, seed=40 + seed)
    config = workspace.config(workspace.spec("m"), workspace.spec("a", "append"), workspace.spec("s", "snapshot"))

    dying = workspace.syncer(config, spark=DyingSession(workspace.target("m")))
    results = {r.name: r for r in dying.sync_all(parallel=1)}  # one table after another: m, then a, then s

    failed = results[workspace.name("a")]
    assert failed.outcome is TableOutcome.FAILED and failed.transient
    assert not isinstance(failed.exception, SharesyncError) and "NO_ACTIVE_SESSION" in (failed.error or "")
    # The tables before and after it synced: the dead session was replaced for the last one.
    assert results[workspace.name("m")].outcome is results[workspace.name("s")].outcome is TableOutcome.SYNCED
    store = open_store(config.state_store)
    [run] = store.runs_for(workspace.name("a"))
    assert run.status.value == "failed" and "SparkConnectException" in (run.error or "")
    assert store.get_checkpoint(workspace.name("a")) is None
    m, s = workspace.path("m"), workspace.path("s")
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m))
    assert_snapshot_target_matches(s, workspace.target("s"), source_version(s))

    retried = workspace.syncer(config).sync_all()
    assert [r.outcome for r in retried] == [TableOutcome.UP_TO_DATE, TableOutcome.SYNCED, TableOutcome.UP_TO_DATE]
    a = workspace.path("a")
    assert_append_target_matches(a, workspace.target("a"), bootstrap_version=0, end_version=source_version(a))


def test_a_bootstrap_starts_the_engine_while_it_downloads_and_a_failed_start_fails_only_the_batch(
    workspace: Workspace, engine: str
) -> None:
    # The embedded engine starts beside the downloads; a remote one is asked first, on the main
    # thread, by the probe that it reads the staging directory (before anything downloads).
    first = "sharesync-engine-start" if engine == SAIL else "MainThread"
    workspace.table("m", rows=30, seed=9)
    config = workspace.config(workspace.spec("m"))
    store = open_store(config.state_store)

    broken = ThreadRecordingSpark(fail=True)
    [failed] = workspace.syncer(config, spark=broken).sync_all()
    assert failed.outcome is TableOutcome.FAILED and "injected: the engine could not start" in (failed.error or "")
    assert broken.threads[0] == first  # embedded: started beside the downloads, raised at the wait
    assert store.get_checkpoint(workspace.name("m")) is None
    assert not Path(workspace.target("m")).exists()

    recording = ThreadRecordingSpark(config=config)
    workspace.syncer(config, spark=recording).sync_all()
    assert recording.threads[0] == first
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], source_version(workspace.path("m")))

    workspace.commit("m", 1, seed=10)
    changes = ThreadRecordingSpark(config=config)
    workspace.syncer(config, spark=changes).sync_all()  # a change batch's staging is Python work: no early start
    assert changes.threads and "sharesync-engine-start" not in changes.threads
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], source_version(workspace.path("m")))
