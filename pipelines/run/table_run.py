"""One table's sync pass under its lease: plan, then execute the plan batch by batch.

:class:`~sharesync.pipelines.run.engine.SyncEngine` decides *whether* a table needs work (one
``/version`` call) and takes the lease; :class:`TableRun` does the work: read the metadata, check
the config against the shared schema (:mod:`~sharesync.pipelines.run.table_context`), plan
(:func:`sharesync.sync.planning.plan_sync`, pure), then run each batch through the one skeleton of
:mod:`~sharesync.pipelines.run.batch_run`. A history gap (or a breaking schema change on a table
set to rebuild, :mod:`.schema_policy`) re-plans once, as a re-bootstrap.

Before planning, the target is compared with the identity its checkpoint recorded
(:mod:`~sharesync.pipelines.run.target_check`): a lost or replaced target is rebuilt from a
snapshot, a rolled-back one replays from its own high-water mark, a foreign one is refused; what
such a pass says (a lease taken from a dead process too) goes to its warnings and next run record.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from functools import partial

from sharesync.pipelines.run.apply import BootstrapAt, apply_bootstrap, apply_changes
from sharesync.pipelines.run.batch_run import BatchRunner, BatchStep, fetch_changes, fetch_snapshot
from sharesync.pipelines.run.commit_time import version_at, version_at_or_before
from sharesync.pipelines.run.directory import read_access
from sharesync.pipelines.run.failures import Attempt
from sharesync.pipelines.run.results import BackfillRequest, BatchKind, BatchResult, TableOutcome, TableSyncResult
from sharesync.pipelines.run.schema_policy import new_columns, rebuild_change
from sharesync.pipelines.run.services import RunServices
from sharesync.pipelines.run.table_context import TableContext, table_context
from sharesync.pipelines.run.target_check import (
    REBUILT,
    Finding,
    TargetCheck,
    high_water_columns,
    judge,
    rebuild_warning,
    refusal,
    replay_checkpoint,
    replay_warning,
    switch_refusal,
    switches_history,
    written_for,
)
from sharesync.pipelines.target.history_rows import history_start
from sharesync.pipelines.target.identity import Glance, glance, high_water_mark, read_identity
from sharesync.pipelines.target.preflight import check_storage_access
from sharesync.state import Checkpoint, LeaseKeeper, RunStats, RunStatus
from sharesync.sync.core.config import Mode, StartAtTimestamp, StartAtVersion, TableConfig
from sharesync.sync.core.errors import HistoryUnavailable, SchemaIncompatible
from sharesync.sync.planning.sync_plan import (
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
from sharesync.sync.protocol.responses import TableMetadata

log = logging.getLogger(__name__)


class TableRun:
    """One table's pass under its lease: plan, then batches until the plan is done."""

    def __init__(
        self, services: RunServices, table: TableConfig, keeper: LeaseKeeper, attempt: Attempt | None = None
    ) -> None:
        self.services = services
        self.table = table
        self.target = services.runtime.locate(table.target)  # read and written with the config's storage settings
        self.keeper = keeper
        self.attempt = attempt or Attempt()
        self.batches: list[BatchResult] = []
        self.warnings: list[str] = []
        self._notes: list[str] = []  # for the record of the next batch that succeeds
        self._refresh_from: int | None = None  # a backfill that re-bootstraps: from this version
        if keeper.takeover is not None:
            self._notice(str(keeper.takeover))

    def run(self, backfill: BackfillRequest | None, started: float) -> TableSyncResult:
        metadata = self.services.client.metadata(self.table.name)
        with read_access(self.services, self.table, metadata) as services:  # url, or the table's directory
            self.services = services
            return self._pass(backfill, started, metadata)

    def _pass(self, backfill: BackfillRequest | None, started: float, metadata: TableMetadata) -> TableSyncResult:
        table, store = self.table, self.services.store
        checkpoint = store.get_checkpoint(table.key)  # re-read under the lease
        context = table_context(table, metadata)  # before any other call: a config error stops here
        policy = new_columns(table, self.target, metadata, self.services.client, checkpoint)
        if policy.table is not table:  # on_new_column: ignore, and the provider has new columns
            self.table = table = policy.table
            context = table_context(table, metadata)
        if policy.warning is not None:
            self._notice(policy.warning)
        if checkpoint is not None and switches_history(checkpoint, table) and read_identity(self.target) is not None:
            raise switch_refusal(checkpoint, table)
        check_storage_access(self.target, self.services.runtime.locate(self.services.config.staging_dir))
        check = self._check_target(checkpoint)
        checkpoint, rebuild = self._answer(check, checkpoint)
        replay_from = (
            version_at(self.services.client, table.name, backfill.starting_timestamp) if backfill is not None else None
        )
        # A full refresh is planned like a first sync: bootstrap from the snapshot at the resolved
        # version, then the changes after it.
        self._refresh_from = self._refreshes_from(backfill, replay_from)
        fresh_start = self._refresh_from is not None
        # History mode rewinds for a full refresh too: a crash after its bootstrap then leaves a
        # checkpoint from which the next pass replays the rest of the history it removed.
        rewinds = not fresh_start or table.mode is Mode.HISTORY
        if backfill is not None and rewinds and checkpoint is not None and table.mode is not Mode.SNAPSHOT:
            checkpoint = self._rewind_for_replay(checkpoint, replay_from)
        if self._refresh_from is not None and checkpoint is not None:
            checkpoint = self._rewind_for_refresh(checkpoint, self._refresh_from)
        source = SourceView(metadata.version, metadata.metadata.id, metadata.cdf_enabled)
        history_gap, schema_change = False, None
        while True:
            rebuilding = rebuild if not self.batches else None
            view = (
                None if fresh_start and not self.batches else _view(checkpoint, table, rebuild=rebuilding is not None)
            )
            try:
                options = self._options(backfill, replay_from, history_gap, first_sync=view is None)
                plan = plan_sync(view, source, dataclasses.replace(options, schema_change=schema_change))
                if rebuilding is not None and isinstance(plan, Bootstrap):
                    plan = dataclasses.replace(plan, warning=rebuild_warning(rebuilding, table.mode, plan.version))
                checkpoint = self._execute(plan, context, checkpoint)
            except HistoryUnavailable as exc:
                if history_gap:
                    raise
                log.warning("%s: %s; re-bootstrapping", table.name, exc.server_message)
                history_gap, self.attempt.recorded = True, False
                checkpoint = store.get_checkpoint(table.key)
                continue
            except SchemaIncompatible as exc:  # nothing written; on_breaking_change: rebuild re-plans once
                if schema_change is not None or (schema_change := rebuild_change(table, exc)) is None:
                    raise
                self.attempt.recorded, checkpoint = False, store.get_checkpoint(table.name)
                continue
            break
        if not self.batches:
            checkpoint = self._settle(checkpoint, check)
        return TableSyncResult(
            table.key,
            table.mode,
            TableOutcome.SYNCED if self.batches else TableOutcome.UP_TO_DATE,
            checkpoint.version if checkpoint else None,
            metadata.version,
            batches=tuple(self.batches),
            warnings=tuple(self.warnings),
            seconds=time.monotonic() - started,
            checkpoint_timestamp=checkpoint.version_timestamp if checkpoint else None,
        )

    # ------------------------------------------------------------ the target against its checkpoint

    def _check_target(self, checkpoint: Checkpoint | None) -> TargetCheck | None:
        """The target compared with its checkpoint's record; None when it is what the record says."""
        table = self.table
        if checkpoint is None or checkpoint.target_version is None or not written_for(checkpoint, table):
            return None  # nothing recorded for this target: the planner decides as before
        written = checkpoint.updated_at
        if glance(table.target, checkpoint.target_version, written, self.services.runtime.storage) is Glance.SAME:
            return None
        check = judge(checkpoint, read_identity(self.target, since=checkpoint.target_version))
        if check.finding is Finding.FOREIGN:
            raise refusal(check, table.name)
        log.info("%s: %s", table.name, check.describe())
        return check

    def _answer(
        self, check: TargetCheck | None, checkpoint: Checkpoint | None
    ) -> tuple[Checkpoint | None, TargetCheck | None]:
        """The checkpoint to plan from, and the finding that calls for a rebuild (None: no rebuild)."""
        if check is None or checkpoint is None or check.finding not in (*REBUILT, Finding.ROLLED_BACK):
            return checkpoint, None
        mode = self.table.mode
        if check.finding in REBUILT or mode is Mode.SNAPSHOT:
            return checkpoint, check
        high = high_water_mark(self.target, *high_water_columns(mode))
        if high is None:
            return checkpoint, check  # no rows to replay from: rebuild
        after = replay_checkpoint(mode, high, checkpoint.version)
        if after < checkpoint.version:  # else its rows reach the checkpoint: nothing to replay
            self._notice(replay_warning(check, after + 1, high))
        # Back to before the replay, and on record, before anything is written (as a backfill does).
        return self._record_target(checkpoint, check, version=after), None

    def _record_target(self, checkpoint: Checkpoint, check: TargetCheck, *, version: int) -> Checkpoint:
        current = check.current
        assert current is not None
        moved = dataclasses.replace(
            checkpoint,
            version=version,
            version_timestamp=checkpoint.version_timestamp if version == checkpoint.version else None,
            updated_at=None,
            target_table_id=current.table_id,
            target_version=current.version,
            target_mode=self.table.mode.value,
        )
        return self.services.store.advance_checkpoint(
            moved, expected_version=checkpoint.version, lease=self.keeper.lease, rewind=True
        )

    def _settle(self, checkpoint: Checkpoint | None, check: TargetCheck | None) -> Checkpoint | None:
        """A pass without batches: record the target's identity as it is now, and say what it had to say."""
        if checkpoint is not None and check is not None and check.finding is Finding.INTACT:
            # Recorded anew (with its write time), so the next pass's glance finds it again.
            checkpoint = self._record_target(checkpoint, check, version=checkpoint.version)
        if self._notes:  # e.g. a lease taken over, with nothing left to sync
            store, version = self.services.store, checkpoint.version if checkpoint else None
            run_id = store.start_run(
                self.table.key, start_version=version, end_version=version, lease=self.keeper.lease
            )
            store.finish_run(run_id, RunStatus.SUCCEEDED, RunStats(), note="; ".join(self._notes))
            self._notes.clear()
        return checkpoint

    def _notice(self, warning: str) -> None:
        self.warnings.append(warning)
        self._notes.append(warning)
        log.warning("%s: %s", self.table.name, warning)

    # ------------------------------------------------------------ planning inputs

    def _rewind_for_replay(self, checkpoint: Checkpoint, replay_from: int | None) -> Checkpoint:
        """Move the checkpoint back to just before the replay, before anything is rewritten.

        Then the replay is an ordinary incremental sync from there, with its crash safety: a
        crash part-way leaves a checkpoint that tells the truth, and the next pass continues from
        it (merge guards make every key converge; append mode rewrites the rows above it). Had the
        checkpoint stayed ahead while replayed batches rewound rows to older states, a crash would
        leave those rows stale behind an "up to date" checkpoint.
        """
        if replay_from is None or replay_from > checkpoint.version or replay_from < 1:
            return checkpoint  # nothing already applied is replayed (or from the very start): as is
        return self._move_back(checkpoint, replay_from - 1, f"replaying from version {replay_from}")

    def _rewind_for_refresh(self, checkpoint: Checkpoint, version: int) -> Checkpoint:
        """Move the checkpoint back to a full refresh's snapshot version before the target is rewritten.

        The refresh makes the target that snapshot, and the checkpoint follows only after the
        write: a crash in between would leave the checkpoint ahead of the target, and the changes
        between the two lost for good. Moved back first, the checkpoint tells the truth either
        way: the target then holds the snapshot, or its rows from before, which are newer — and
        the changes after ``version`` bring both up to date (merge guards; append mode rewrites
        the rows above the checkpoint; snapshot mode takes a new snapshot).
        """
        if version >= checkpoint.version:
            return checkpoint
        return self._move_back(checkpoint, version, f"full refresh from version {version}")

    def _move_back(self, checkpoint: Checkpoint, version: int, why: str) -> Checkpoint:
        """The checkpoint at ``version`` (behind it), on record under the lease before anything is rewritten."""
        back = dataclasses.replace(checkpoint, version=version, version_timestamp=None, updated_at=None)
        log.info("%s: %s (checkpoint %s → %s)", self.table.name, why, checkpoint.version, version)
        return self.services.store.advance_checkpoint(
            back, expected_version=checkpoint.version, lease=self.keeper.lease, rewind=True
        )

    def _refreshes_from(self, backfill: BackfillRequest | None, replay_from: int | None) -> int | None:
        """The version a backfill re-bootstraps from; None when it replays changes (or is none).

        A full refresh, a replay from version 0 and, in history mode, a replay from where the
        target's history starts or earlier: the rows it opened there came from a snapshot, which
        the changes after that version cannot rebuild.
        """
        if backfill is None or replay_from is None:
            return None
        if backfill.full_refresh or replay_from == 0:
            return replay_from
        if self.table.mode is Mode.HISTORY:
            start = history_start(self.target)
            if start is not None and replay_from <= start:
                return replay_from
        return None

    def _options(
        self, backfill: BackfillRequest | None, replay_from: int | None, history_gap: bool, *, first_sync: bool
    ) -> PlanOptions:
        table = self.table
        start_version = None
        # ``start`` matters for the first sync only; resolving a timestamp after that would be a
        # wasted call, and one that fails for good once the provider's log no longer holds it.
        # A full refresh is planned as a first sync from its own version: ``start`` is not asked.
        if self._refresh_from is not None:
            start_version, replay_from = self._refresh_from, None
        elif first_sync and isinstance(table.start, StartAtVersion):
            start_version = table.start.version
        elif first_sync and isinstance(table.start, StartAtTimestamp) and not history_gap:
            start_version = version_at(self.services.client, table.name, table.start.timestamp)
        until = None
        if backfill is not None and backfill.ending_timestamp is not None:
            until = version_at_or_before(self.services.client, table.name, backfill.ending_timestamp)
        return PlanOptions(
            mode=table.mode,
            max_versions_per_batch=self.services.config.batch_size(table),
            start_version=start_version,
            replay_from=replay_from,
            until_version=until,
            history_gap=history_gap,
        )

    # ------------------------------------------------------------ execution

    def _execute(self, plan: SyncPlan, context: TableContext, checkpoint: Checkpoint | None) -> Checkpoint | None:
        runner = BatchRunner(self.services, context, self.keeper, self.attempt)
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
        note = "; ".join([*self._notes, *([step.note] if step.note else [])]) or None
        stored, result = runner.run(dataclasses.replace(step, note=note), checkpoint)
        self._notes.clear()  # said by this batch's record
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
        threshold = self.services.config.rewrite_threshold(table)
        # A full refresh rewrites history from its version; a bootstrap the provider's lost history
        # moved elsewhere keeps the history synced before.
        rewrites_from = self._refresh_from if version == self._refresh_from and not self.batches else None
        return BatchStep(
            BatchKind.BOOTSTRAP,
            VersionRange(version, version),
            fetch=partial(fetch_snapshot, self.services, context, version, checkpoint),
            apply=lambda staged, fetched: apply_bootstrap(
                spark,
                table,
                self.target,
                staged,
                context.expr,
                reason=reason,
                checkpoint=checkpoint,
                snapshot=BootstrapAt(fetched.end, fetched.end_commit, rewrites_from),
                rewrite_threshold=threshold,
            ),
            note=warning,
        )

    def _changes_step(
        self, context: TableContext, batch: VersionRange, checkpoint: Checkpoint | None, replay_from: int | None
    ) -> BatchStep:
        assert checkpoint is not None, "changes are only applied on top of a checkpoint"
        spark, table = self.services.spark, self.table
        threshold = self.services.config.rewrite_threshold(table)
        apply = partial(apply_changes, spark, table, self.target)
        return BatchStep(
            BatchKind.CHANGES,
            batch,
            fetch=partial(fetch_changes, self.services, context, batch, checkpoint.version_timestamp),
            apply=lambda staged, _: apply(
                staged, context.expr, batch=batch, replay_from=replay_from, rewrite_threshold=threshold
            ),
            net_keys=table.keys if table.mode is Mode.MERGE else None,
        )


def _view(checkpoint: Checkpoint | None, table: TableConfig, *, rebuild: bool = False) -> CheckpointView | None:
    """What the planner sees; ``rebuild``: the target must be rebuilt, as for a target new to the config."""
    if checkpoint is None:
        return None
    matches = written_for(checkpoint, table) and not rebuild
    return CheckpointView(checkpoint.version, checkpoint.table_id, target_matches=matches)
