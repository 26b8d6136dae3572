"""One table's sync pass under its lease: plan, then execute the plan batch by batch.

:class:`~sharesync.pipelines.run.engine.SyncEngine` decides *whether* a table needs work (one
``/version`` call) and takes the lease; :class:`TableRun` does the work: read the metadata,
check the config against the shared schema (:mod:`~sharesync.pipelines.run.context`), plan
(:func:`sharesync.sync.planning.plan_sync`, pure), then run each batch through the one skeleton
of :mod:`~sharesync.pipelines.run.batch_run`. A history gap found on the way re-plans once, as a
re-bootstrap.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import datetime, timedelta
from functools import partial

from sharesync.pipelines.run.apply import apply_bootstrap, apply_changes
from sharesync.pipelines.run.batch_run import BatchRunner, BatchStep, fetch_changes, fetch_snapshot
from sharesync.pipelines.run.context import TableContext, table_context
from sharesync.pipelines.run.results import (
    BackfillRequest,
    BatchKind,
    BatchResult,
    TableOutcome,
    TableSyncResult,
)
from sharesync.pipelines.run.services import RunServices
from sharesync.state import Checkpoint, LeaseKeeper
from sharesync.sync.core.config import Mode, StartAtTimestamp, StartAtVersion, TableConfig
from sharesync.sync.core.errors import HistoryUnavailable, SharingHTTPError
from sharesync.sync.planning import (
    ApplyChanges,
    Bootstrap,
    BootstrapReason,
    CheckpointView,
    PlanOptions,
    SourceView,
    SyncPlan,
    UpToDate,
    VersionRange,
    plan_sync,
)

log = logging.getLogger(__name__)


class TableRun:
    """One table's pass under its lease: plan, then batches until the plan is done."""

    def __init__(self, services: RunServices, table: TableConfig, keeper: LeaseKeeper) -> None:
        self.services = services
        self.table = table
        self.keeper = keeper
        self.batches: list[BatchResult] = []
        self.warnings: list[str] = []

    def run(self, backfill: BackfillRequest | None, started: float) -> TableSyncResult:
        table, store = self.table, self.services.store
        checkpoint = store.get_checkpoint(table.name)  # re-read under the lease
        metadata = self.services.client.metadata(table.name)
        context = table_context(table, metadata)  # before any other call: a config error stops here
        replay_from = self._version_at(backfill.starting_timestamp) if backfill is not None else None
        # A full refresh (or a replay from version 0) is planned like a first sync: bootstrap from
        # the snapshot at the resolved version, then the changes after it.
        fresh_start = backfill is not None and (backfill.full_refresh or replay_from == 0)
        if backfill is not None and not fresh_start and checkpoint is not None and table.mode is not Mode.SNAPSHOT:
            checkpoint = self._rewind_for_replay(checkpoint, replay_from)
        source = SourceView(metadata.version, metadata.metadata.id, metadata.cdf_enabled)
        history_gap = False
        while True:
            view = None if fresh_start and not self.batches else _view(checkpoint, table)
            try:
                options = self._options(backfill, replay_from, history_gap, first_sync=view is None)
                checkpoint = self._execute(plan_sync(view, source, options), context, checkpoint)
            except HistoryUnavailable as exc:
                if history_gap:
                    raise
                log.warning("%s: %s; re-bootstrapping", table.name, exc.server_message)
                history_gap = True
                checkpoint = store.get_checkpoint(table.name)
                continue
            break
        return TableSyncResult(
            table.name,
            table.mode,
            TableOutcome.SYNCED if self.batches else TableOutcome.UP_TO_DATE,
            checkpoint.version if checkpoint else None,
            metadata.version,
            batches=tuple(self.batches),
            warnings=tuple(self.warnings),
            seconds=time.monotonic() - started,
            checkpoint_timestamp=checkpoint.version_timestamp if checkpoint else None,
        )

    # ------------------------------------------------------------ planning inputs

    def _rewind_for_replay(self, checkpoint: Checkpoint, replay_from: int | None) -> Checkpoint:
        """Move the checkpoint back to just before the replay, before anything is rewritten.

        Then the replay is an ordinary incremental sync from there, with its crash safety: a
        crash part-way leaves a checkpoint that tells the truth, and the next pass continues from
        it (merge guards make every key converge; append mode rewrites the rows above it). Had the
        checkpoint stayed ahead while replayed batches rewound rows to older states, a crash would
        leave those rows stale behind an "up to date" checkpoint.
        """
        if replay_from is None or replay_from > checkpoint.version:
            return checkpoint  # nothing already applied is replayed: an ordinary sync
        back = dataclasses.replace(checkpoint, version=replay_from - 1, version_timestamp=None, updated_at=None)
        log.info(
            "%s: replaying from version %s (checkpoint %s → %s)",
            self.table.name,
            replay_from,
            checkpoint.version,
            back.version,
        )
        return self.services.store.advance_checkpoint(
            back, expected_version=checkpoint.version, lease=self.keeper.lease, rewind=True
        )

    def _options(
        self, backfill: BackfillRequest | None, replay_from: int | None, history_gap: bool, *, first_sync: bool
    ) -> PlanOptions:
        table = self.table
        start_version = None
        # ``start`` matters for the first sync only; resolving a timestamp after that would be a
        # wasted call, and one that fails for good once the provider's log no longer holds it.
        if first_sync and isinstance(table.start, StartAtVersion):
            start_version = table.start.version
        elif first_sync and isinstance(table.start, StartAtTimestamp) and not history_gap:
            start_version = self._version_at(table.start.timestamp)
        until = None
        if backfill is not None and backfill.ending_timestamp is not None:
            until = self._version_at_or_before(backfill.ending_timestamp)
        if backfill is not None and (backfill.full_refresh or replay_from == 0):
            # A full refresh re-bootstraps: planned as a first sync from the resolved version.
            start_version, replay_from = replay_from, None
        return PlanOptions(
            mode=table.mode,
            max_versions_per_batch=self.services.config.batch_size(table),
            start_version=start_version,
            replay_from=replay_from,
            until_version=until,
            history_gap=history_gap,
        )

    def _version_at(self, moment: datetime) -> int:
        """The first version committed at or after ``moment``."""
        return self.services.client.table_version(self.table.name, starting_timestamp=moment).version

    def _version_at_or_before(self, moment: datetime) -> int | None:
        """The newest version committed at or before ``moment`` (None: no limit needed)."""
        try:
            after = self._version_at(moment + timedelta(milliseconds=1))
        except SharingHTTPError:
            return None  # the moment is after the latest commit: replay to the latest
        return max(after - 1, 0)

    # ------------------------------------------------------------ execution

    def _execute(self, plan: SyncPlan, context: TableContext, checkpoint: Checkpoint | None) -> Checkpoint | None:
        runner = BatchRunner(self.services, context, self.keeper)
        match plan:
            case UpToDate():
                return checkpoint
            case Bootstrap(version=version, reason=reason, then=then, warning=warning):
                if warning:
                    self.warnings.append(warning)
                    log.warning("%s: %s", self.table.name, warning)
                step = self._bootstrap_step(context, version, reason, checkpoint, warning)
                checkpoint = self._run(runner, step, checkpoint)
                for batch in then:
                    checkpoint = self._run(runner, self._changes_step(context, batch, checkpoint, None), checkpoint)
                return checkpoint
            case ApplyChanges(batches=ranges, replay_from=replay_from):
                for batch in ranges:
                    step = self._changes_step(context, batch, checkpoint, replay_from)
                    checkpoint = self._run(runner, step, checkpoint)
                return checkpoint
        raise AssertionError(f"unknown plan {plan!r}")  # pragma: no cover

    def _run(self, runner: BatchRunner, step: BatchStep, checkpoint: Checkpoint | None) -> Checkpoint:
        stored, result = runner.run(step, checkpoint)
        self.batches.append(result)
        return stored

    def _bootstrap_step(
        self,
        context: TableContext,
        version: int,
        reason: BootstrapReason,
        checkpoint: Checkpoint | None,
        warning: str | None,
    ) -> BatchStep:
        spark, table = self.services.spark, self.table
        return BatchStep(
            BatchKind.BOOTSTRAP,
            VersionRange(version, version),
            fetch=partial(fetch_snapshot, self.services, context, version),
            apply=lambda staged: apply_bootstrap(
                spark, table, staged, context.expr, reason=reason, checkpoint=checkpoint
            ),
            note=warning,
        )

    def _changes_step(
        self, context: TableContext, batch: VersionRange, checkpoint: Checkpoint | None, replay_from: int | None
    ) -> BatchStep:
        assert checkpoint is not None, "changes are only applied on top of a checkpoint"
        spark, table = self.services.spark, self.table
        threshold = self.services.config.rewrite_threshold(table)
        return BatchStep(
            BatchKind.CHANGES,
            batch,
            fetch=partial(fetch_changes, self.services, context, batch, checkpoint.version_timestamp),
            apply=lambda staged: apply_changes(
                spark, table, staged, context.expr, batch=batch, replay_from=replay_from, rewrite_threshold=threshold
            ),
            net_keys=table.keys if table.mode is Mode.MERGE else None,
        )


def _view(checkpoint: Checkpoint | None, table: TableConfig) -> CheckpointView | None:
    if checkpoint is None:
        return None
    matches = checkpoint.target == table.target and checkpoint.mode == table.mode.value
    return CheckpointView(checkpoint.version, checkpoint.table_id, target_matches=matches)
