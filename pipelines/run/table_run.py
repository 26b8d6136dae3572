"""One table's sync pass under its lease: plan, then execute the plan batch by batch.

:class:`~sharesync.pipelines.run.engine.SyncEngine` decides *whether* a table needs work (one ``/version``
call) and takes the lease; :class:`TableRun` does the work: read the metadata, check the
config against the shared schema, plan (:func:`sharesync.sync.planning.plan_sync`, pure), then per
batch fetch → prune → download and stage (:mod:`sharesync.sync.staging.batch`) → apply with Spark
(:mod:`sharesync.pipelines.jobs.merge`) → advance the checkpoint by compare-and-swap, recording one run per
batch. A history gap found on the way re-plans once, as a re-bootstrap.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import shutil
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharesync.pipelines.run.results import (
    BackfillRequest,
    BatchResult,
    TableOutcome,
    TableSyncResult,
)
from sharesync.state import Checkpoint, RunStats, RunStatus
from sharesync.sync.core.config import Mode, StartAtTimestamp, StartAtVersion, TableConfig
from sharesync.sync.core.errors import (
    ConfigError,
    HistoryUnavailable,
    SharesyncError,
    SharingHTTPError,
)
from sharesync.sync.core.redact import redact
from sharesync.sync.core.timestamps import from_millis
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
from sharesync.sync.predicates import Expr, columns_referenced, parse_where
from sharesync.sync.protocol.download import ProgressCallback
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.files import StageLayout

if TYPE_CHECKING:
    from sharesync.pipelines.jobs.layout import ApplyStats
    from sharesync.pipelines.run.engine import SyncEngine
    from sharesync.sync.protocol.changes import ChangeFile
    from sharesync.sync.protocol.client import ChangesResult, QueryResult, TableMetadata

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TablePlanContext:
    """Everything about one table that the batches of one pass share."""

    table: TableConfig
    metadata: TableMetadata
    expr: Expr | None
    layout: StageLayout
    hints: batches.ServerHints
    replay_from: int | None


class TableRun:
    """One table's pass under its lease: plan, then batches until the plan is done."""

    def __init__(self, engine: SyncEngine, table: TableConfig, keeper: Any) -> None:
        self.engine = engine
        self.table = table
        self.keeper = keeper
        self.store = engine.store
        self.client = engine.client
        self.batches: list[BatchResult] = []
        self.warnings: list[str] = []

    def run(self, backfill: BackfillRequest | None, started: float) -> TableSyncResult:
        table = self.table
        checkpoint = self.store.get_checkpoint(table.name)  # re-read under the lease
        metadata = self.client.metadata(table.name)
        context = self._context(metadata, backfill, checkpoint)
        # A full refresh (or a replay from version 0) is planned like a first sync: bootstrap from
        # the snapshot at the resolved version, then the changes after it.
        fresh_start = backfill is not None and (backfill.full_refresh or context.replay_from == 0)
        if backfill is not None and not fresh_start and checkpoint is not None and table.mode is not Mode.SNAPSHOT:
            checkpoint = self._rewind_for_replay(checkpoint, context.replay_from)
        history_gap = False
        while True:
            source = SourceView(metadata.version, metadata.metadata.id, metadata.cdf_enabled)
            view = None if fresh_start and not self.batches else _view(checkpoint, table)
            try:
                options = self._options(context, backfill, history_gap, first_sync=view is None)
                plan = plan_sync(view, source, options)
                checkpoint = self._execute(plan, context, checkpoint)
            except HistoryUnavailable as exc:
                if history_gap:
                    raise
                log.warning("%s: %s; re-bootstrapping", table.name, exc.server_message)
                history_gap = True
                checkpoint = self.store.get_checkpoint(table.name)
                continue
            break
        return TableSyncResult(
            table.name,
            TableOutcome.SYNCED if self.batches else TableOutcome.UP_TO_DATE,
            checkpoint.version if checkpoint else None,
            metadata.version,
            batches=tuple(self.batches),
            warnings=tuple(self.warnings),
            seconds=time.monotonic() - started,
            checkpoint_timestamp=checkpoint.version_timestamp if checkpoint else None,
            columns=tuple(
                (f.name, f.type_name)
                for f in context.metadata.metadata.table_schema.fields
                if f.name in context.layout.columns
            ),
        )

    # ------------------------------------------------------------ planning inputs

    def _context(
        self, metadata: TableMetadata, backfill: BackfillRequest | None, checkpoint: Checkpoint | None
    ) -> TablePlanContext:
        table = self.table
        schema = metadata.metadata.table_schema
        missing = [k for k in table.keys if schema.field(k) is None]
        if missing:
            raise ConfigError(
                f"tables[{table.name}].keys: {missing} not in the shared table's columns "
                f"({', '.join(schema.names)}); fix 'keys' in the config"
            )
        if table.columns is not None:
            unknown = [c for c in table.columns if schema.field(c) is None]
            if unknown:
                raise ConfigError(
                    f"tables[{table.name}].columns: {unknown} not in the shared table's columns "
                    f"({', '.join(schema.names)}); fix 'columns' in the config"
                )
        expr = parse_where(table.where, schema, table=table.name) if table.where else None
        keep: list[str] | None = None
        if table.columns is not None:
            needed = [*table.keys, *table.columns, *(sorted(columns_referenced(expr)) if expr else [])]
            keep = [f.name for f in schema.fields if f.name.lower() in {n.lower() for n in needed}]
        layout = StageLayout.build(schema, metadata.partition_columns, keep)
        replay_from = None
        if backfill is not None:
            replay_from = self.client.table_version(table.name, starting_timestamp=backfill.starting_timestamp).version
        return TablePlanContext(
            table, metadata, expr, layout, batches.ServerHints.of(expr, metadata.partition_columns), replay_from
        )

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
        return self.store.advance_checkpoint(
            back, expected_version=checkpoint.version, lease=self.keeper.lease, rewind=True
        )

    def _options(
        self, context: TablePlanContext, backfill: BackfillRequest | None, history_gap: bool, *, first_sync: bool
    ) -> PlanOptions:
        table = self.table
        start_version = None
        # ``start`` matters for the first sync only; resolving a timestamp after that would be a
        # wasted call, and one that fails for good once the provider's log no longer holds it.
        if first_sync and isinstance(table.start, StartAtVersion):
            start_version = table.start.version
        elif first_sync and isinstance(table.start, StartAtTimestamp) and not history_gap:
            start_version = self.client.table_version(table.name, starting_timestamp=table.start.timestamp).version
        until = None
        if backfill is not None and backfill.ending_timestamp is not None:
            until = self._version_at_or_before(backfill.ending_timestamp)
        replay_from = context.replay_from
        if backfill is not None and (backfill.full_refresh or replay_from == 0):
            # A full refresh re-bootstraps: planned as a first sync from the resolved version.
            return PlanOptions(
                mode=table.mode,
                max_versions_per_batch=self.engine.config.batch_size(table),
                start_version=replay_from,
                until_version=until,
                history_gap=history_gap,
            )
        return PlanOptions(
            mode=table.mode,
            max_versions_per_batch=self.engine.config.batch_size(table),
            start_version=start_version,
            replay_from=replay_from,
            until_version=until,
            history_gap=history_gap,
        )

    def _version_at_or_before(self, moment: datetime) -> int | None:
        """The newest version committed at or before ``moment`` (None: no limit needed)."""
        try:
            after = self.client.table_version(
                self.table.name, starting_timestamp=moment + timedelta(milliseconds=1)
            ).version
        except SharingHTTPError:
            return None  # the moment is after the latest commit: replay to the latest
        return max(after - 1, 0)

    # ------------------------------------------------------------ execution

    def _execute(self, plan: SyncPlan, context: TablePlanContext, checkpoint: Checkpoint | None) -> Checkpoint | None:
        match plan:
            case UpToDate():
                return checkpoint
            case Bootstrap(version=version, reason=reason, then=then, warning=warning):
                if warning:
                    self.warnings.append(warning)
                    log.warning("%s: %s", self.table.name, warning)
                checkpoint = self._bootstrap(version, reason, context, checkpoint, warning)
                for batch in then:
                    checkpoint = self._apply_changes(batch, context, checkpoint, None)
                return checkpoint
            case ApplyChanges(batches=ranges, replay_from=replay_from):
                for batch in ranges:
                    checkpoint = self._apply_changes(batch, context, checkpoint, replay_from)
                return checkpoint
        raise AssertionError(f"unknown plan {plan!r}")  # pragma: no cover

    def _bootstrap(
        self,
        version: int,
        reason: BootstrapReason,
        context: TablePlanContext,
        checkpoint: Checkpoint | None,
        warning: str | None,
    ) -> Checkpoint:
        table = self.table
        latest = version >= context.metadata.version
        run_id = self.store.start_run(table.name, start_version=version, end_version=version)
        began = time.monotonic()
        directory = batches.batch_dir(self.engine.config.staging_dir, table.name, f"bootstrap-{version}")
        try:
            result = self.client.query(
                table.name,
                version=None if latest else version,
                predicate_hints=context.hints.predicate_hints,
                json_predicate_hints=context.hints.json_predicate_hints,
            )
            version = result.version
            files, _pruned = batches.prune(batches.snapshot_change_files(result), context.expr, context.layout.schema)
            schema = result.metadata.table_schema
            layout = StageLayout.build(schema, result.metadata.partition_columns, context.layout.columns)
            staged = self._stage(result, files, layout, directory, f"bootstrap v{version}", snapshot=True)
            self.keeper.check()
            applied = self._apply_bootstrap(staged.path, version, reason, checkpoint, context)
            commit_ts = _max_timestamp(f.file for f in files)
            # The target now is the snapshot at ``version``: the checkpoint may move back to it.
            stored = self._advance(
                checkpoint, version, commit_ts, result.metadata.id, result.metadata.schema_string, rewind=True
            )
            stats = _run_stats(applied, staged)
            self.store.finish_run(run_id, RunStatus.SUCCEEDED, stats, end_version=version, note=warning)
        except BaseException as exc:
            self._fail_run(run_id, exc)
            raise
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self.batches.append(
            BatchResult(
                "bootstrap",
                version,
                version,
                stats,
                time.monotonic() - began,
                stored.version_timestamp,
                stored.version_timestamp,
                warning,
            )
        )
        return stored

    def _apply_bootstrap(
        self,
        staged: Path,
        version: int,
        reason: BootstrapReason,
        checkpoint: Checkpoint | None,
        context: TablePlanContext,
    ) -> Any:
        from sharesync.pipelines.jobs import merge

        table = self.table
        row_filter = self._row_filter(context)
        match table.mode:
            case Mode.MERGE:
                return merge.replace_target(
                    self.engine.spark,
                    staged,
                    table.target,
                    columns=self._columns(),
                    keys=table.keys,
                    row_filter=row_filter,
                    soft_delete=table.soft_delete,
                )
            case Mode.SNAPSHOT if checkpoint is None or reason is BootstrapReason.TARGET_CHANGED:
                # First sync, or after 'sharesync reset': the schema is replaced too, which is the
                # documented way past a breaking schema change.
                return merge.replace_target(
                    self.engine.spark, staged, table.target, columns=self._columns(), row_filter=row_filter
                )
            case Mode.SNAPSHOT:
                return merge.apply_snapshot(
                    self.engine.spark, staged, table.target, columns=self._columns(), row_filter=row_filter
                )
            case Mode.APPEND:
                # The change log continues after a gap (the snapshot lands as inserts at its version);
                # it restarts when versions restart (first sync, re-created or rewound source).
                keeps_log = checkpoint is not None and reason in (BootstrapReason.HISTORY_GAP, BootstrapReason.NO_CDF)
                after = checkpoint.version if keeps_log and checkpoint else -1
                return merge.apply_append(
                    self.engine.spark,
                    staged,
                    table.target,
                    after_version=after,
                    columns=self._columns(),
                    row_filter=row_filter,
                )
        raise AssertionError(table.mode)  # pragma: no cover

    def _apply_changes(
        self,
        batch: VersionRange,
        context: TablePlanContext,
        checkpoint: Checkpoint | None,
        replay_from: int | None,
    ) -> Checkpoint:
        from sharesync.pipelines.jobs import merge

        table = self.table
        assert checkpoint is not None, "changes are only applied on top of a checkpoint"
        run_id = self.store.start_run(table.name, start_version=batch.start, end_version=batch.end)
        began = time.monotonic()
        directory = batches.batch_dir(self.engine.config.staging_dir, table.name, f"changes-{batch.start}-{batch.end}")
        try:
            result = self.client.changes(
                table.name, starting_version=batch.start, ending_version=batch.end, include_historical_metadata=True
            )
            metadata = batches.batch_schema(result, batch.end)
            files, _pruned = batches.prune(batches.change_files(result, batch.end), context.expr, metadata.table_schema)
            layout = StageLayout.build(metadata.table_schema, metadata.partition_columns, context.layout.columns)
            net_keys = table.keys if table.mode is Mode.MERGE else None
            staged = self._stage(result, files, layout, directory, f"v{batch.start}..{batch.end}", net_keys=net_keys)
            self.keeper.check()
            row_filter = self._row_filter(context)
            if table.mode is Mode.APPEND:
                applied = merge.apply_append(
                    self.engine.spark,
                    staged.path,
                    table.target,
                    after_version=batch.start - 1,
                    columns=self._columns(),
                    row_filter=row_filter,
                )
            elif table.mode is Mode.MERGE:
                applied = merge.apply_merge(
                    self.engine.spark,
                    staged.path,
                    table.target,
                    keys=table.keys,
                    columns=self._columns(),
                    row_filter=row_filter,
                    soft_delete=table.soft_delete,
                    replay_from=replay_from,
                    rewrite_threshold=self.engine.config.rewrite_threshold(table),
                )
            else:  # pragma: no cover - snapshot mode never plans changes
                raise AssertionError(table.mode)
            timestamps = batches.commit_timestamps(result)
            end_ts = timestamps.get(batch.end)
            commit_ts = from_millis(end_ts) if end_ts is not None else checkpoint.version_timestamp
            stored = self._advance(checkpoint, batch.end, commit_ts, metadata.id, metadata.schema_string)
            stats = _run_stats(applied, staged)
            self.store.finish_run(run_id, RunStatus.SUCCEEDED, stats, end_version=batch.end)
        except BaseException as exc:
            self._fail_run(run_id, exc)
            raise
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        start_ts = timestamps.get(batch.start)
        self.batches.append(
            BatchResult(
                "changes",
                batch.start,
                batch.end,
                stats,
                time.monotonic() - began,
                from_millis(start_ts) if start_ts is not None else None,
                stored.version_timestamp,
            )
        )
        return stored

    # ------------------------------------------------------------ small helpers

    def _advance(
        self,
        checkpoint: Checkpoint | None,
        version: int,
        commit_ts: datetime | None,
        table_id: str,
        schema_string: str,
        *,
        rewind: bool = False,
    ) -> Checkpoint:
        new = Checkpoint(
            name=self.table.name,
            version=version,
            table_id=table_id,
            schema_fingerprint=hashlib.sha256(schema_string.encode()).hexdigest()[:16],
            target=self.table.target,
            mode=self.table.mode.value,
            version_timestamp=commit_ts,
        )
        return self.store.advance_checkpoint(
            new, expected_version=checkpoint.version if checkpoint else None, lease=self.keeper.lease, rewind=rewind
        )

    def _fail_run(self, run_id: int, exc: BaseException) -> None:
        message = str(exc) if isinstance(exc, SharesyncError) else f"{type(exc).__name__}: {exc}"
        try:
            self.store.finish_run(run_id, RunStatus.FAILED, error=redact(message))
        except SharesyncError:  # the store itself failed: the original error matters more
            log.exception("could not record the failure of run %s", run_id)

    def _row_filter(self, context: TablePlanContext) -> Any:
        if context.expr is None:
            return None
        from sharesync.sync.predicates import to_spark

        return to_spark(context.expr)

    def _stage(
        self,
        result: QueryResult | ChangesResult,
        files: list[ChangeFile],
        layout: StageLayout,
        directory: Path,
        label: str,
        *,
        snapshot: bool = False,
        net_keys: Sequence[str] | None = None,
    ) -> batches.StagedBatch:
        return batches.stage(
            self.client,
            result,
            files,
            layout,
            directory,
            concurrency=self.engine.config.concurrency(self.table),
            ca_bundle=self.engine.config.ca_bundle,
            progress=self._progress_for(label, len(files)),
            snapshot=snapshot,
            net_keys=net_keys,
        )

    def _columns(self) -> Sequence[str] | None:
        return self.table.columns

    def _progress_for(self, label: str, files: int) -> ProgressCallback | None:
        if self.engine._progress is None or files == 0:
            return None
        return self.engine._progress(f"{self.table.name} {label}", files)


def _run_stats(applied: ApplyStats, staged: batches.StagedBatch) -> RunStats:
    """What one batch did, as the run record keeps it."""
    return RunStats(
        rows_inserted=applied.inserted,
        rows_updated=applied.updated,
        rows_deleted=applied.deleted,
        files_downloaded=staged.files,
        bytes_downloaded=staged.bytes,
        url_refreshes=staged.url_refreshes,
    )


def _view(checkpoint: Checkpoint | None, table: TableConfig) -> CheckpointView | None:
    if checkpoint is None:
        return None
    matches = checkpoint.target == table.target and checkpoint.mode == table.mode.value
    return CheckpointView(checkpoint.version, checkpoint.table_id, target_matches=matches)


def _max_timestamp(files: Iterable[Any]) -> datetime | None:
    stamps = [f.timestamp for f in files if getattr(f, "timestamp", None) is not None]
    return from_millis(max(stamps)) if stamps else None
