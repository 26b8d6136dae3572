"""One table's sync pass under its lease: read the facts, decide, then carry the decision out.

:class:`~sharesync.pipelines.run.sync_pass.Syncer` decides *whether* a table needs work (one
``/version`` call) and takes the lease; :class:`TableRun` does the work: read the metadata, check
the config against the shared schema (:mod:`~sharesync.pipelines.run.table_context`), compare the target
with its checkpoint's record (:mod:`~sharesync.sync.planning.target_judgement`), resolve a backfill's
timestamps — then hand those facts to :func:`~sharesync.sync.planning.run_plan.prepare_run` and
:func:`~sharesync.sync.planning.run_plan.plan_run` (pure), make the checkpoint moves they return
and run each batch through :mod:`~sharesync.pipelines.run.batch_run`, then :mod:`.upkeep`. A history
gap (or a breaking change on a table set to rebuild) plans again as ``replan`` says, once per cause.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from functools import partial

from sharesync.pipelines.modes.base import Applied, BatchJob, BootstrapAt, ModeStrategy
from sharesync.pipelines.run.batch_run import BatchRunner, BatchStep, Fetched, fetch_changes, fetch_snapshot
from sharesync.pipelines.run.directory import read_access
from sharesync.pipelines.run.failures import Attempt
from sharesync.pipelines.run.results import BackfillRequest, BatchKind, BatchResult, TableOutcome, TableSyncResult
from sharesync.pipelines.run.resume import resume_from_target
from sharesync.pipelines.run.schema_policy import new_columns, rebuild_change
from sharesync.pipelines.run.services import RunServices
from sharesync.pipelines.run.table_context import TableContext, table_context
from sharesync.pipelines.run.target_check import switch_refusal
from sharesync.pipelines.run.upkeep import upkeep
from sharesync.pipelines.targets.delta.fencing import Fence
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import Glance
from sharesync.state import Checkpoint, LeaseKeeper, RunStats, RunStatus
from sharesync.sync.core.config import StartAtTimestamp, StartAtVersion, TableConfig
from sharesync.sync.core.errors import (
    ChangeFeedRefused,
    ChangeFeedRequired,
    HistoryUnavailable,
    SchemaIncompatible,
    TargetError,
)
from sharesync.sync.core.location import Location
from sharesync.sync.planning.kept_target import LeftTarget
from sharesync.sync.planning.run_plan import (
    Backfill,
    Move,
    PlanState,
    Prepared,
    RecordTarget,
    Refused,
    Rewind,
    RunFacts,
    RunPlan,
    plan_run,
    prepare_run,
    replan,
    wants_high_water,
)
from sharesync.sync.planning.sync_plan import (
    ApplyChanges,
    Bootstrap,
    CheckpointView,
    NoChangeFeed,
    SourceView,
    UpToDate,
    VersionRange,
)
from sharesync.sync.planning.target_judgement import TargetCheck, judge, switches_layout, written_for
from sharesync.sync.protocol.commit_time import version_at, version_at_or_before
from sharesync.sync.protocol.responses import TableMetadata

log = logging.getLogger(__name__)


class TableRun:
    """One table's pass under its lease: facts, decision, then batches until the plan is done."""

    def __init__(
        self, services: RunServices, table: TableConfig, keeper: LeaseKeeper, attempt: Attempt | None = None
    ) -> None:
        self.services = services
        self.table = table
        self.target = services.locate(table.target)  # read and written with the config's storage settings
        self.keeper = keeper
        self.attempt = attempt or Attempt()
        self.fence = Fence(table.key, self.target, keeper.lease.acquired_at)  # every batch of this holding
        self.batches: list[BatchResult] = []
        self.compactions: list[str] = []  # what the upkeep after each batch did (pipelines/run/upkeep.py)
        self.warnings: list[str] = []
        self._notes: list[str] = []  # for the record of the next batch that succeeds (a lease taken over, …)
        if keeper.takeover is not None:
            self._notice(str(keeper.takeover))

    @property
    def strategy(self) -> ModeStrategy:
        """The table's mode, which the batches are staged, prepared and written by."""
        return self.services.modes.strategy(self.table)

    def run(self, backfill: BackfillRequest | None, started: float) -> TableSyncResult:
        metadata = self.services.client.metadata(self.table.name)
        with read_access(self.services, self.table, metadata) as services:  # url, or the table's directory
            self.services = services
            return self._pass(backfill, started, metadata)

    def _pass(self, backfill: BackfillRequest | None, started: float, metadata: TableMetadata) -> TableSyncResult:
        table, store = self.table, self.services.store
        checkpoint = store.get_checkpoint(table.key)  # re-read under the lease
        staging = self.services.locate(self.services.config.staging_dir)
        context = table_context(table, metadata)  # before any other call: a config error stops here
        DELTA.check_storage_access(self.target, staging)  # before the first read of the target: one clear line
        storage = self.services.config.storage
        if resumed := resume_from_target(
            store, table, self.target, checkpoint, storage, staging, self.strategy, self.keeper.lease
        ):
            checkpoint = resumed.checkpoint  # a lost or older state store: the target says how far it got
            self._notice(resumed.notice)
        policy = new_columns(table, self.target, metadata, self.services.client, checkpoint)
        if policy.table is not table:  # on_new_column: ignore, and the provider has new columns
            self.table = table = policy.table
            context = table_context(table, metadata)
        if policy.warning is not None:
            self._notice(policy.warning)
        if checkpoint is not None and switches_layout(checkpoint, table) and DELTA.identity(self.target) is not None:
            raise switch_refusal(checkpoint, table)
        check = self._check_target(checkpoint)
        decided = prepare_run(self._facts(checkpoint, check, metadata, backfill))
        if isinstance(decided, Refused):
            raise TargetError(decided.message)
        for notice in decided.notices:
            self._notice(notice)
        checkpoint = self._move(decided.moves, checkpoint, check)
        checkpoint = self._carry_out(decided.state, context, checkpoint)
        if not self.batches:
            checkpoint = self._settle(checkpoint, check, decided)
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
            compaction="; ".join(self.compactions) or None,
        )

    # ------------------------------------------------------------ facts

    def _check_target(self, checkpoint: Checkpoint | None) -> TargetCheck | None:
        """The target compared with its checkpoint's record; None when it is what the record says."""
        table = self.table
        if checkpoint is None or checkpoint.target_version is None or not written_for(checkpoint, table):
            return None  # nothing recorded for this target: the planner decides as before
        written = checkpoint.updated_at
        if DELTA.glance(table.target, checkpoint.target_version, written, self.services.config.storage) is Glance.SAME:
            return None
        check = judge(checkpoint, DELTA.identity(self.target, since=checkpoint.target_version))
        log.info("%s: %s", table.name, check.describe())
        return check

    def _facts(
        self,
        checkpoint: Checkpoint | None,
        check: TargetCheck | None,
        metadata: TableMetadata,
        backfill: BackfillRequest | None,
    ) -> RunFacts:
        """What the decision needs, read from the target and the provider (each only when it matters)."""
        table, client = self.table, self.services.client
        mode = table.mode
        target = None
        if check is not None:
            wanted = wants_high_water(check.finding, mode)
            target = check.fact(
                DELTA.high_water_mark(self.target, *self.strategy.high_water_columns) if wanted else None
            )
        request = until = start = None
        if backfill is not None:
            replay_from = version_at(client, table.name, backfill.starting_timestamp)
            request = Backfill(replay_from, full_refresh=backfill.full_refresh, discard=backfill.discard_target)
            if backfill.ending_timestamp is not None:
                until = version_at_or_before(client, table.name, backfill.ending_timestamp)
            if not backfill.full_refresh and replay_from > 0:
                start = self.strategy.history_start(self.target)
        return RunFacts(
            name=table.name,
            mode=mode,
            checkpoint=_view(checkpoint, table),
            source=SourceView(metadata.version, metadata.metadata.id, metadata.change_feed),
            max_versions_per_batch=self.services.config.batch_size(table),
            target=target,
            backfill=request,
            until_version=until,
            history_start=start,
            left=None if checkpoint is not None and written_for(checkpoint, table) else self._left_target(),
        )

    def _left_target(self) -> LeftTarget | None:
        """The change log or row history at the target's path, when it holds rows (only it has them)."""
        found, modes = DELTA.identity(self.target), self.services.modes
        layout = modes.kept_layout(found.columns) if found is not None else None
        newest = (
            DELTA.high_water_mark(self.target, *modes.of_mode(layout).high_water_columns)
            if layout is not None
            else None
        )
        return None if layout is None or newest is None else LeftTarget(layout, self.table.target, newest)

    def _start_version(self, state: PlanState) -> int | None:
        """The configured ``start``, for a first sync only: resolving a timestamp after that would be
        a wasted call, and one that fails for good once the provider's log no longer holds it."""
        start = self.table.start
        if not state.first_sync:
            return None
        if isinstance(start, StartAtVersion):
            return start.version
        if isinstance(start, StartAtTimestamp) and not state.history_gap:
            return version_at(self.services.client, self.table.name, start.timestamp)
        return None

    # ------------------------------------------------------------ checkpoint moves

    def _move(
        self, moves: tuple[Move, ...], checkpoint: Checkpoint | None, check: TargetCheck | None
    ) -> Checkpoint | None:
        """Each move on record under the lease, before anything is written."""
        for move in moves:
            assert checkpoint is not None, "moves are only made to a stored checkpoint"
            match move:
                case RecordTarget(version=version):
                    assert check is not None
                    checkpoint = self._record_target(checkpoint, check, version=version)
                case Rewind(version=version, why=why):
                    back = dataclasses.replace(checkpoint, version=version, version_timestamp=None, updated_at=None)
                    log.info("%s: %s (checkpoint %s → %s)", self.table.name, why, checkpoint.version, version)
                    checkpoint = self.services.store.advance_checkpoint(
                        back, expected_version=checkpoint.version, lease=self.keeper.lease, rewind=True
                    )
        return checkpoint

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

    def _settle(self, checkpoint: Checkpoint | None, check: TargetCheck | None, decided: Prepared) -> Checkpoint | None:
        """A pass without batches: record the target's identity as it is now, and say what it had to say."""
        if checkpoint is not None and check is not None and decided.record_if_idle:
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

    # ------------------------------------------------------------ planning

    def _carry_out(self, state: PlanState, context: TableContext, checkpoint: Checkpoint | None) -> Checkpoint | None:
        """Plan from ``state`` and execute; after a history gap or a breaking change, as :func:`replan` says."""
        try:
            return self._execute(plan_run(state, self._start_version(state)), context, checkpoint)
        except HistoryUnavailable as exc:
            error: Exception = exc
            gap, change = True, None
        except SchemaIncompatible as exc:  # nothing written; on_breaking_change: rebuild plans again
            error, gap, change = exc, False, rebuild_change(self.table, exc)
        except ChangeFeedRefused as exc:  # the metadata left the feed unknown, and it is off
            error, gap, change = exc, False, None
        refused = error.server_message if isinstance(error, ChangeFeedRefused) else None
        stored = self.services.store.get_checkpoint(self.table.key)
        view, applied = _view(stored, self.table), bool(self.batches)
        again = replan(state, view, applied, history_gap=gap, schema_change=change, feed_refused=refused)
        if again is None:
            raise error
        if isinstance(error, HistoryUnavailable | ChangeFeedRefused):
            log.warning("%s: %s; planning again", self.table.name, error.server_message)
        self.attempt.recorded = False
        return self._carry_out(again, context, stored)

    # ------------------------------------------------------------ execution

    def _execute(self, decided: RunPlan, context: TableContext, checkpoint: Checkpoint | None) -> Checkpoint | None:
        runner = BatchRunner(self.services, context, self.keeper, self.attempt, self.fence)
        match plan := decided.plan:
            case UpToDate():
                return checkpoint
            case Bootstrap(then=then, warning=warning):
                if warning:
                    self.warnings.append(warning)
                    log.warning("%s: %s", self.table.name, warning)
                step = self._bootstrap_step(context, plan, checkpoint, decided)
                checkpoint = self._run(runner, step, checkpoint)
                for batch in then:
                    checkpoint = self._run(runner, self._changes_step(context, batch, checkpoint, None), checkpoint)
                return checkpoint
            case ApplyChanges(batches=ranges, replay_from=replay_from):
                for batch in ranges:
                    step = self._changes_step(context, batch, checkpoint, replay_from)
                    checkpoint = self._run(runner, step, checkpoint)
                return checkpoint
            case NoChangeFeed(message=message):
                raise ChangeFeedRequired(message)
        raise AssertionError(f"unknown plan {plan!r}")  # pragma: no cover

    def _run(self, runner: BatchRunner, step: BatchStep, checkpoint: Checkpoint | None) -> Checkpoint:
        note = "; ".join([*self._notes, *([step.note] if step.note else [])]) or None
        stored, result = runner.run(dataclasses.replace(step, note=note), checkpoint)
        self._notes.clear()  # said by this batch's record
        self.batches.append(result)
        kept = upkeep(self.services, self.table, self.target, self.fence)
        self.compactions += [kept.done] if kept.done else []
        self.warnings += [kept.warning] if kept.warning else []
        return stored

    def _bootstrap_step(
        self,
        context: TableContext,
        plan: Bootstrap,
        checkpoint: Checkpoint | None,
        decided: RunPlan,
    ) -> BatchStep:
        version, reason = plan.version, plan.reason

        def apply(staged: Location, fetched: Fetched) -> Applied:
            snapshot = BootstrapAt(
                version=fetched.end,
                committed=fetched.end_commit,
                replay_from=decided.rewrites_from,
                keep_after=decided.keep_after,
            )
            job = self._job(context, staged, fetched)
            return self.strategy.bootstrap(job, reason=reason, checkpoint=checkpoint, snapshot=snapshot)

        return BatchStep(
            BatchKind.BOOTSTRAP,
            VersionRange(version, version),
            fetch=partial(fetch_snapshot, self.services, context, version, checkpoint),
            apply=apply,
            note=plan.warning,
        )

    def _changes_step(
        self, context: TableContext, batch: VersionRange, checkpoint: Checkpoint | None, replay_from: int | None
    ) -> BatchStep:
        assert checkpoint is not None, "changes are only applied on top of a checkpoint"

        def apply(staged: Location, fetched: Fetched) -> Applied:
            job = self._job(context, staged, fetched)
            return self.strategy.changes(job, batch=batch, replay_from=replay_from)

        return BatchStep(
            BatchKind.CHANGES,
            batch,
            fetch=partial(fetch_changes, self.services, context, batch, checkpoint.version_timestamp),
            apply=apply,
            net_keys=self.table.keys if self.strategy.nets_by_key else None,
        )

    def _job(self, context: TableContext, staged: Location, fetched: Fetched) -> BatchJob:
        """A staged batch and where it goes, as the table's mode writes it."""
        table = self.table
        return BatchJob(
            spark=self.services.spark,
            table=table,
            target=self.target,
            staged=staged,
            expr=context.expr,
            rewrite_threshold=self.services.config.rewrite_threshold(table),
            record=fetched.record(table),
            deletion_vectors=self.services.config.deletion_vectors(table),
        )


def _view(checkpoint: Checkpoint | None, table: TableConfig) -> CheckpointView | None:
    """What planning sees of a stored checkpoint."""
    if checkpoint is None:
        return None
    return CheckpointView(checkpoint.version, checkpoint.table_id, target_matches=written_for(checkpoint, table))
