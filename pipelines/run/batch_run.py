"""One batch of one table, bootstrap or changes, through the one skeleton every batch follows.

start a run record → ask the provider for the batch's files → check the config against the
batch's schema → download and stage → check the lease is still ours → apply with Spark →
advance the checkpoint by compare-and-swap, with the identity of the target state it now
describes (:mod:`sharesync.pipelines.targets.delta.identity`) → finish the run record. A failure anywhere
marks the run failed (redacted) and leaves the checkpoint where it was; the staged files go
either way.

Files the provider's storage no longer has (404/410: vacuumed after they were listed) mean, for a
batch of changes, that the provider lost that history: :class:`HistoryUnavailable`, answered by
a re-bootstrap like every other gap. A snapshot is listed again and staged once more; a second
miss is a clear, transient error (the next pass lists it anew).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sharesync.pipelines.jobs.session import start_early
from sharesync.pipelines.modes.base import Applied
from sharesync.pipelines.run.failures import Attempt, describe, store_failed
from sharesync.pipelines.run.results import BatchKind, BatchResult
from sharesync.pipelines.run.services import RunServices
from sharesync.pipelines.run.submissions import submissions_for
from sharesync.pipelines.run.table_context import TableContext, check_columns
from sharesync.pipelines.targets.delta.fencing import Fence, fencing
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import ApplyStats
from sharesync.pipelines.targets.record import CommitRecord
from sharesync.state import Checkpoint, LeaseKeeper, RunStats, RunStatus
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.errors import (
    DownloadError,
    HistoryUnavailable,
    RunAlreadyFinished,
    SharesyncError,
    SharingHTTPError,
)
from sharesync.sync.core.location import Location
from sharesync.sync.core.timestamps import from_millis
from sharesync.sync.planning.sync_plan import VersionRange
from sharesync.sync.protocol.changes import ChangeFile
from sharesync.sync.protocol.client import ChangesResult, QueryResult
from sharesync.sync.protocol.commit_time import commit_time, filed_commit_times, version_commit_time
from sharesync.sync.protocol.labels import check_not_older
from sharesync.sync.protocol.wire import Metadata
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.files import StageLayout

log = logging.getLogger(__name__)

GONE = (404, 410)  # what object storage answers for a file that was deleted


@dataclass(frozen=True)
class Fetched:
    """A batch as the provider listed it: the files to download and the schema they are in."""

    result: QueryResult | ChangesResult
    files: list[ChangeFile]
    metadata: Metadata  # in force at the batch's last version
    start: int
    end: int
    start_commit: datetime | None
    end_commit: datetime | None

    def record(self, table: TableConfig) -> str:
        """The record the batch's target commit carries (:mod:`~sharesync.pipelines.targets.record`)."""
        committed = self.end_commit
        return CommitRecord.model_validate(
            {
                "table": table.key,
                "tableId": self.metadata.id,
                "from": self.start,
                "to": self.end,
                "mode": table.mode.value,
                "schema": fingerprint(self.metadata),
                "committedMs": round(committed.timestamp() * 1000) if committed is not None else None,
            }
        ).encode()


@dataclass(frozen=True)
class BatchStep:
    """What sets one batch apart: how its files are fetched and how they are applied."""

    kind: BatchKind
    planned: VersionRange
    fetch: Callable[[], Fetched]
    apply: Callable[[Location, Fetched], Applied]
    net_keys: Sequence[str] | None = None  # a mode that nets changes per key: stage the net change
    note: str | None = None  # kept with the run record of a batch that succeeded

    @property
    def directory(self) -> str:
        if self.kind is BatchKind.BOOTSTRAP:
            return f"bootstrap-{self.planned.end}"
        return f"changes-{self.planned.start}-{self.planned.end}"


def fetch_snapshot(
    services: RunServices, context: TableContext, version: int, previous: Checkpoint | None = None
) -> Fetched:
    """The snapshot at ``version`` (the latest when that is the provider's current version).

    A mode whose rows open at the snapshot's commit (history mode: ``dated_snapshot``) asks for
    the version itself whenever the provider shares the table's history: then the files carry the
    commit time its rows are valid from. Where none does, that time is asked for apart
    (:func:`_snapshot_commit_time`): rows never open or close at an unknown time.
    """
    dates_rows = services.modes.strategy(context.table).dated_snapshot
    dated = dates_rows and context.metadata.cdf_enabled
    latest = version >= context.metadata.version and not dated
    result = services.client.query(
        context.table.name,
        version=None if latest else version,
        predicate_hints=context.hints.predicate_hints,
        json_predicate_hints=context.hints.json_predicate_hints,
        submissions=submissions_for(services.config, services.store, context.table.provider),
    )
    if latest:  # the client compared a time-travel answer's labels; a latest one can only be stale
        check_not_older(result.version, version, f"snapshot of {context.table.name}")
    read_at = datetime.now(UTC)
    listed = batches.snapshot_change_files(result)
    files, _ = batches.prune(listed, context.expr, context.layout.schema)
    committed = _max_timestamp(listed)
    if committed is None and dates_rows:
        committed = _snapshot_commit_time(services, context, result.version, previous) or read_at
    return Fetched(result, files, result.metadata, result.version, result.version, committed, committed)


def _snapshot_commit_time(
    services: RunServices, context: TableContext, version: int, previous: Checkpoint | None
) -> datetime | None:
    """When a snapshot no file dates was committed (an empty or filtered-out one), searched after
    the checkpoint's commit when it is older, else from the epoch (a few dozen ``/version`` calls).

    None when the provider cannot say — it answers no timestamp query on a table without a change
    data feed, which is not asked; its history rows then open and close when sharesync read the
    snapshot, the nearest time known to be at or after the commit.
    """
    if not context.metadata.cdf_enabled:
        return None
    after = from_millis(0)
    if previous is not None and previous.version < version and previous.version_timestamp is not None:
        after = previous.version_timestamp
    found = commit_time(services.client, context.table.name, version, after)
    return found if found is not None and found > after else None  # the search never moved: refused


def fetch_changes(
    services: RunServices, context: TableContext, batch: VersionRange, previous_commit: datetime | None
) -> Fetched:
    """The change files of ``batch``, by the protocol's per-version rule."""
    result = services.client.changes(
        context.table.name, starting_version=batch.start, ending_version=batch.end, include_historical_metadata=True
    )
    metadata = batches.batch_schema(result, batch.end)
    files, _ = batches.prune(batches.change_files(result, batch.end), context.expr, metadata.table_schema)
    stamps = filed_commit_times(result)
    start, end = stamps.get(batch.start), stamps.get(batch.end)
    if end is not None:
        end_commit: datetime | None = from_millis(end)
    else:  # the last version has no file to read its commit time from: ask the provider
        end_commit = version_commit_time(
            services.client, context.table.name, batch.end, stamps=stamps, previous=previous_commit
        )
    return Fetched(
        result, files, metadata, batch.start, batch.end, from_millis(start) if start is not None else None, end_commit
    )


class BatchRunner:
    """Runs the batches of one table's pass under its lease."""

    def __init__(
        self,
        services: RunServices,
        context: TableContext,
        keeper: LeaseKeeper,
        attempt: Attempt | None = None,
        fence: Fence | None = None,
    ) -> None:
        self.services = services
        self.context = context
        self.keeper = keeper
        self.attempt = attempt or Attempt()
        self.fence = fence  # the holding's stale-writer fence (pipelines/targets/delta/fencing.py); one per holding

    def run(self, step: BatchStep, checkpoint: Checkpoint | None) -> tuple[Checkpoint, BatchResult]:
        table, store = self.context.table, self.services.store
        run_id = store.start_run(
            table.key, start_version=step.planned.start, end_version=step.planned.end, lease=self.keeper.lease
        )
        began = time.monotonic()
        staging = self.services.locate(self.services.config.staging_dir)
        directory = batches.batch_dir(staging, table.key, step.directory)
        try:
            fetched = step.fetch()
            check_columns(table, fetched.metadata.table_schema, version=fetched.end)
            # Every bootstrap writes its target with the engine, which starts while the files download
            # (bench/README.md, *Bootstrap*): measured where they are kept as downloaded; where they
            # are re-encoded (append, history mode, deletion vectors) the overlap is not measured apart.
            engine = start_early(self.services.spark) if step.kind is BatchKind.BOOTSTRAP and fetched.files else None
            fetched, staged = self._stage_listed(step, fetched, directory)
            if engine is not None:
                engine()  # on this thread: the wait restores Ctrl-C as a start here would
            self.keeper.check()
            with fencing(self.fence):
                applied = step.apply(staged.path, fetched)
            # Off the disk before the checkpoint moves: once it has, no run stages this batch
            # again, so a process killed in between would leave its files for good.
            batches.remove_batch(directory)
            # A bootstrap makes the target the snapshot at its version: the checkpoint may move back to it.
            stored = self._advance(checkpoint, fetched, rewind=step.kind is BatchKind.BOOTSTRAP)
            stats = _run_stats(applied.stats, staged)
            store.finish_run(run_id, RunStatus.SUCCEEDED, stats, end_version=fetched.end, note=step.note)
        except BaseException as exc:
            self._fail_run(run_id, exc)
            raise
        finally:
            batches.remove_batch(directory)  # a failed batch's files (a second call finds nothing)
        seconds = time.monotonic() - began
        result = BatchResult(
            kind=step.kind,
            start_version=fetched.start,
            end_version=fetched.end,
            stats=stats,
            changes=applied.changes,
            seconds=seconds,
            start_commit_timestamp=fetched.start_commit,
            end_commit_timestamp=stored.version_timestamp,
        )
        return stored, result

    def _stage_listed(
        self, step: BatchStep, fetched: Fetched, directory: Location
    ) -> tuple[Fetched, batches.StagedBatch]:
        """Stage the batch; a file gone from storage is lost history (changes) or a re-listing (snapshot)."""
        name = self.context.table.name
        try:
            return fetched, self._stage(step, fetched, directory)
        except SharingHTTPError as exc:
            if exc.status not in GONE:
                raise
            if step.kind is BatchKind.CHANGES:
                raise HistoryUnavailable(
                    exc.status,
                    exc.error_code,
                    f"a change file of versions {fetched.start}..{fetched.end} is gone from the provider's "
                    f"storage ({exc.server_message})",
                    context=f"changes of {name}",
                ) from None
            log.warning(
                "%s: a file of the snapshot at version %s is gone from storage; listing it again", name, fetched.end
            )
        again = step.fetch()
        check_columns(self.context.table, again.metadata.table_schema, version=again.end)
        try:
            return again, self._stage(step, again, directory)
        except SharingHTTPError as exc:
            if exc.status not in GONE:
                raise
            raise DownloadError(
                f"{name}: the provider's snapshot at version {again.end} lists files its storage no longer has, "
                f"twice (HTTP {exc.status}: the provider may be vacuuming the table right now); the next sync "
                "lists it anew — if this persists, ask the provider"
            ) from None

    def _stage(self, step: BatchStep, fetched: Fetched, directory: Location) -> batches.StagedBatch:
        config, name = self.services.config, self.context.table.name
        schema = fetched.metadata.table_schema
        layout = StageLayout.build(schema, fetched.metadata.partition_columns, self.context.layout.columns)
        snapshot = step.kind is BatchKind.BOOTSTRAP
        label = f"bootstrap v{fetched.end}" if snapshot else f"v{fetched.start}..{fetched.end}"
        return batches.stage(
            self.services.client,
            fetched.result,
            fetched.files,
            layout,
            directory,
            concurrency=config.concurrency(self.context.table),
            ca_bundle=config.ca_bundle,
            progress=self.services.progress_for(f"{name} {label}", len(fetched.files)),
            snapshot=snapshot,
            net_keys=step.net_keys,
            budget=self.services.budget,
            # Only the engine reads such a mode's bootstrap (append and history mode read theirs in Python too).
            direct=self.services.modes.strategy(self.context.table).direct_snapshot,
        )

    def _advance(self, checkpoint: Checkpoint | None, fetched: Fetched, *, rewind: bool) -> Checkpoint:
        table = self.context.table
        target = DELTA.identity(self.services.locate(table.target))  # the state this checkpoint now describes
        new = Checkpoint(
            name=table.key,
            version=fetched.end,
            table_id=fetched.metadata.id,
            schema_fingerprint=fingerprint(fetched.metadata),
            target=table.target,
            mode=table.mode.value,
            version_timestamp=fetched.end_commit,
            target_table_id=target.table_id if target is not None else None,
            target_version=target.version if target is not None else None,
            target_mode=table.mode.value if target is not None else None,
        )
        expected = checkpoint.version if checkpoint else None
        return self.services.store.advance_checkpoint(
            new, expected_version=expected, lease=self.keeper.lease, rewind=rewind
        )

    def _fail_run(self, run_id: int, exc: BaseException) -> None:
        try:
            self.services.store.finish_run(run_id, RunStatus.FAILED, error=describe(exc))
        except RunAlreadyFinished as closed:
            # A holder woken after its lease expired: the contender that took the table over closed
            # this run as abandoned, so its failure is on record already.
            log.info("%s", closed)
        except SharesyncError as error:  # the store itself failed: the original error matters more
            store_failed(f"could not record the failure of run {run_id}", error, exc)
            return
        self.attempt.recorded = True


def fingerprint(metadata: Metadata) -> str:
    """The schema fingerprint a checkpoint stores."""
    return hashlib.sha256(metadata.schema_string.encode()).hexdigest()[:16]


def _run_stats(applied: ApplyStats, staged: batches.StagedBatch) -> RunStats:
    """What one batch did, as the run record keeps it: target rows and transfer counters."""
    return RunStats(
        rows_inserted=applied.inserted,
        rows_updated=applied.updated,
        rows_deleted=applied.deleted,
        files_downloaded=staged.files,
        bytes_downloaded=staged.bytes,
        url_refreshes=staged.url_refreshes,
    )


def _max_timestamp(files: Iterable[ChangeFile]) -> datetime | None:
    stamps = [c.file.timestamp for c in files if c.file.timestamp is not None]
    return from_millis(max(stamps)) if stamps else None
