"""A history batch up to the write: read, planned against the target, its plan staged; then the job.

History mode keeps every version of a key, so its batch is planned in Arrow
(:mod:`sharesync.sync.planning.history_plan`: no netting across versions; exactly once by each
key's watermark) against the target's rows, read with deltalake
(:mod:`sharesync.pipelines.targets.delta.history_rows`). The plan is staged as one parquet file next to
the batch — staging's last write — and only then is the Spark job
(:func:`~sharesync.pipelines.modes.history.history.write_history`) handed the finished batch. The engine
starts in a thread while the batch is planned.

The batch is staged per file, never netted (a netted batch lost the versions between its
first and last, which history keeps): a ``netted.parquet`` batch is refused. ``row_filter`` is
the user's filter as a predicate tree, evaluated in Arrow with the plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import HISTORY_COLUMNS, projected
from sharesync.pipelines.jobs.session import start_early
from sharesync.pipelines.jobs.staged import staged_files
from sharesync.pipelines.modes.history.history import HistoryStats, PlannedHistory, tracked_columns, write_history
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.state import TargetState, require_columns, require_replaceable
from sharesync.sync.core.changefeed import CHANGE_COLUMNS, CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION
from sharesync.sync.core.config import DEFAULT_REWRITE_THRESHOLD
from sharesync.sync.core.errors import SchemaIncompatible, SyncError
from sharesync.sync.core.location import Location, Place, locate
from sharesync.sync.planning.history_plan import HistoryPlan, SnapshotAt, plan_history
from sharesync.sync.staging.files import staged_writer
from sharesync.sync.staging.netted import NETTED_FILE

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from sharesync.sync.predicates import Expr

__all__ = ["apply_history", "bootstrap_history"]

_PLAN_DIR = "_history_plan"  # inside the staged batch: staged_files() skips it, the run removes it


@dataclass(frozen=True, kw_only=True)
class _Job:
    staged: Location
    target: Location
    keys: Sequence[str]
    columns: Sequence[str] | None
    row_filter: Expr | None
    track_history: Sequence[str] | None
    track_history_except: Sequence[str] | None
    replay_from: int | None
    rewrite_threshold: float | None
    conform: bool = False  # a rebuild: move the target's rows into the batch's schema first
    record: str | None = None  # the batch's commit record (pipelines/targets/delta/commit_record.py)
    deletion_vectors: bool = True  # a target this creates is merge-on-read


def apply_history(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    keys: Sequence[str],
    columns: Sequence[str] | None = None,
    row_filter: Expr | None = None,
    track_history: Sequence[str] | None = None,
    track_history_except: Sequence[str] | None = None,
    replay_from: int | None = None,
    rewrite_threshold: float | None = DEFAULT_REWRITE_THRESHOLD,
    record: str | None = None,
    deletion_vectors: bool = True,
) -> HistoryStats:
    """Apply a batch of changes: every version that changes a key gives it a history row.

    ``replay_from`` (a backfill): history from that version on is rewritten — rows opened at or
    after it are removed and rows closed at or after it reopen — in the same commit as the batch.
    Pass it to the batch that starts at that version only: on a later batch it would remove what
    the earlier ones of the replay wrote. A missing target is created from the batch.
    """
    job = _Job(
        staged=locate(staged),
        target=locate(target),
        keys=keys,
        columns=columns,
        row_filter=row_filter,
        track_history=track_history,
        track_history_except=track_history_except,
        replay_from=replay_from,
        rewrite_threshold=rewrite_threshold,
        record=record,
        deletion_vectors=deletion_vectors,
    )
    return _apply(spark, job, None, replace=False)


def bootstrap_history(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    keys: Sequence[str],
    version: int,
    commit_timestamp: datetime | None = None,
    columns: Sequence[str] | None = None,
    row_filter: Expr | None = None,
    replace: bool = False,
    replay_from: int | None = None,
    rewrite_threshold: float | None = DEFAULT_REWRITE_THRESHOLD,
    conform: bool = False,
    record: str | None = None,
    deletion_vectors: bool = True,
) -> HistoryStats:
    """Bootstrap from the snapshot at ``version``, committed at ``commit_timestamp``.

    The staged rows' own version wins (an empty snapshot has none); without ``commit_timestamp``
    the newest file time among the rows stands in, as the run records it for a bootstrap.

    ``replace`` (a first sync, or after ``sharesync reset``): the target becomes the snapshot's
    rows, opened at ``version`` — any table sharesync wrote there before (any mode) is replaced.
    Otherwise (a re-bootstrap: history gap, re-created source): every open row closes at
    ``version`` and the snapshot's rows open; the history before stays. ``replay_from`` (a full
    refresh from that version): history from it on is removed first. ``conform`` (a rebuild after
    a breaking schema change): the history is first moved into the snapshot's schema
    (:mod:`~sharesync.pipelines.jobs.conform`).
    """
    job = _Job(
        staged=locate(staged),
        target=locate(target),
        keys=keys,
        columns=columns,
        row_filter=row_filter,
        track_history=None,
        track_history_except=None,
        replay_from=replay_from,
        rewrite_threshold=rewrite_threshold,
        conform=conform,
        record=record,
        deletion_vectors=deletion_vectors,
    )
    return _apply(spark, job, SnapshotAt(version, commit_timestamp), replace=replace)


def _apply(
    spark: SparkSession | Callable[[], SparkSession], job: _Job, snapshot: SnapshotAt | None, *, replace: bool
) -> HistoryStats:
    if not job.keys or isinstance(job.keys, str):
        raise SyncError(f"target '{job.target}': history mode needs a list of key columns, got {job.keys!r}")
    files = staged_files(job.staged)
    if any(f.name == NETTED_FILE for f in files):
        raise SyncError(
            f"staged batch '{job.staged}' was netted per key, which drops the versions history mode keeps; "
            "stage history-mode batches without net_keys"
        )
    state = DELTA.inspect(job.target)
    if not files and (not state.exists or (snapshot is None and job.replay_from is None)):
        return HistoryStats()  # nothing to write, or no schema to create a table with
    if state.exists and replace:
        require_replaceable(state)
    elif state.exists:
        require_columns(state, list(HISTORY_COLUMNS), "history")
    engine = start_early(spark)  # it starts while the batch is read and planned
    changes = _read_changes(files, state)
    keys = _batch_keys(changes, job.keys)
    data_columns = projected(changes.column_names, keys, job.columns)
    existing = state.exists and not replace
    tracked = tracked_columns(data_columns, keys, job.track_history, job.track_history_except)
    values = [c for c in data_columns if c not in keys] if tracked is not None else []
    present = set(state.column_names)  # a column the batch adds is NULL in the target's rows (the plan knows)
    compared = [c for c in values if c in present]
    history = DELTA.read_history(job.target, keys, compared, replay_from=job.replay_from) if existing else None
    if snapshot is not None:
        snapshot = _snapshot_at(changes, snapshot)
    kept = _kept(changes, job.row_filter)
    plan = plan_history(
        changes, history, keys, data_columns, tracked=tracked, kept=kept, replay_from=job.replay_from, snapshot=snapshot
    )
    rewrite = history is not None and _rewrites(plan, history.num_rows, job.rewrite_threshold)
    stats = HistoryStats(
        rows_in_batch=changes.num_rows,
        inserted=plan.opened,
        updated=plan.updated,
        deleted=plan.removed,
        target_version=state.version,
        opened=plan.opened,
        closed=plan.closed,
    )
    null_keys, spans = plan.null_keys, plan.key_spans
    staged_plan = None if plan.is_empty and existing else _stage_plan(plan, job.staged)
    # The embedded engine runs in this process: give it the memory of the batch, the target's
    # keys and the plan (all on disk now) before it writes, as staging does after netting.
    del changes, history, plan
    _release_arrow_memory()
    planned = PlannedHistory(
        staged=job.staged,
        target=job.target,
        files=files,
        state=state,
        keys=keys,
        data_columns=data_columns,
        stats=stats,
        plan_file=staged_plan,
        null_keys=null_keys,
        rewrite=rewrite,
        replace=replace,
        conform=job.conform,
        record=job.record,
        deletion_vectors=job.deletion_vectors,
        key_spans=spans,
    )
    return DELTA.applied(write_history(engine, planned))


def _rewrites(plan: HistoryPlan, target_rows: int, threshold: float | None) -> bool:
    return threshold is not None and plan.rows >= threshold * target_rows


def _stage_plan(plan: HistoryPlan, staged: Location) -> Location:
    """The plan as one parquet file next to the batch, for the engine to read as the write's
    source; written a slice at a time."""
    directory = staged.join(_PLAN_DIR)
    if directory.is_local:
        directory.filesystem.create_dir(directory.path)
    path = directory.join("plan.parquet")
    with staged_writer(path.path, plan.schema, path.filesystem) as writer:
        for batch in plan.batches():
            writer.write_table(batch)
    return path


def _release_arrow_memory() -> None:
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _read_changes(files: Sequence[Location], state: TargetState) -> pa.Table:
    """The batch's change rows; with no file (a backfill's empty first batch), none in the target's columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if files:
        changes = pa.concat_tables([pq.read_table(f.path, filesystem=f.filesystem) for f in files])
        try:  # contiguous columns: planning takes rows from them by index, many times
            return changes.combine_chunks()
        except pa.ArrowInvalid:  # a column over 2 GiB of values cannot be one array: chunks work, slower
            return changes
    fields = [f for f in DELTA.table_schema(state.location) if f.name not in HISTORY_COLUMNS]
    types = {CHANGE_TYPE: pa.string(), COMMIT_VERSION: pa.int64(), COMMIT_TIMESTAMP: pa.timestamp("us", tz="UTC")}
    return pa.schema([*fields, *(pa.field(c, types[c]) for c in CHANGE_COLUMNS)]).empty_table()


def _snapshot_at(changes: pa.Table, given: SnapshotAt) -> SnapshotAt:
    """The staged rows' version (an empty snapshot has none: the given one); the given commit
    time, else the newest file time among the rows, as the run records for a bootstrap."""
    import pyarrow.compute as pc

    version = int(changes[COMMIT_VERSION][0].as_py()) if changes.num_rows else given.version
    newest = pc.max(changes[COMMIT_TIMESTAMP]).as_py() if changes.num_rows else None
    return SnapshotAt(version, given.timestamp if given.timestamp is not None else newest)


def _batch_keys(changes: pa.Table, keys: Sequence[str]) -> list[str]:
    by_lower = {c.lower(): c for c in changes.column_names}
    missing = [k for k in keys if k.lower() not in by_lower]
    if missing:
        raise SchemaIncompatible(
            f"key column(s) {missing} are missing from the change files of this batch (columns: "
            f"{', '.join(changes.column_names)}); run 'sharesync reset' for this table to bootstrap from the "
            "current snapshot"
        )
    return [by_lower[k.lower()] for k in keys]


def _kept(changes: pa.Table, row_filter: Expr | None) -> pa.ChunkedArray | None:
    """The user's filter on every change row (NULL where unknown: the plan keeps only TRUE)."""
    if row_filter is None:
        return None
    import pyarrow.dataset as ds

    from sharesync.sync.predicates import to_arrow

    return ds.dataset(changes).to_table(columns={"keep": to_arrow(row_filter, changes.schema)})["keep"]
