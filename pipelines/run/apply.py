"""Apply one staged batch with the Spark job its table's mode calls for, and say what it did.

The jobs (:mod:`sharesync.pipelines.jobs`) return what they committed; the target format counts
it (:meth:`~sharesync.pipelines.targets.port.TargetFormat.applied`), and :class:`Applied` adds the mode's
own account (:class:`~sharesync.pipelines.run.results.TargetChanges`): keys for merge, change rows
by type for append, rows written for snapshot, history rows opened and closed for history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.append import apply_append
from sharesync.pipelines.jobs.history import HistoryStats
from sharesync.pipelines.jobs.merge import apply_merge
from sharesync.pipelines.jobs.snapshot import apply_snapshot, replace_target
from sharesync.pipelines.jobs.staged import staged_files
from sharesync.pipelines.run.history_batch import apply_history, bootstrap_history
from sharesync.pipelines.run.results import TargetChanges
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import ApplyStats
from sharesync.state import Checkpoint
from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_VERSION, ChangeType
from sharesync.sync.core.config import Mode, TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange
from sharesync.sync.predicates import Expr
from sharesync.sync.staging.netting import net_staged_batch

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

Spark = Callable[[], "SparkSession"]

# Bootstraps that make a snapshot-mode target the snapshot, schema included.
_REPLACING = (BootstrapReason.TARGET_CHANGED, BootstrapReason.SCHEMA_CHANGED)
# Bootstraps an append target's change log continues through (the snapshot lands as inserts).
# (A table without a change feed never bootstraps one: the planner refuses it.)
_KEEPS_LOG = (BootstrapReason.HISTORY_GAP, BootstrapReason.SCHEMA_CHANGED)
# Bootstraps that move the rows kept into the snapshot's schema first.
_CONFORMS = (BootstrapReason.SCHEMA_CHANGED, BootstrapReason.KEPT)


@dataclass(frozen=True)
class Applied:
    stats: ApplyStats
    changes: TargetChanges


@dataclass(frozen=True)
class BootstrapAt:
    """The snapshot a bootstrap applies: its version, its commit time (None: unknown), for a
    full-refresh backfill in history mode the version history is rewritten from, and in append
    mode the version up to which the target's rows stay (a reset or refreshed log)."""

    version: int
    committed: datetime | None = None
    replay_from: int | None = None
    keep_after: int | None = None


def apply_bootstrap(
    spark: Spark,
    table: TableConfig,
    target: Location,
    staged: Location,
    expr: Expr | None,
    *,
    reason: BootstrapReason,
    checkpoint: Checkpoint | None,
    snapshot: BootstrapAt,
    rewrite_threshold: float | None,
    record: str | None = None,
) -> Applied:
    """Make the target the staged snapshot (append mode: add it to the change log as inserts;
    history mode: open its rows at its version)."""
    if table.mode is Mode.HISTORY:
        history = bootstrap_history(
            spark,
            staged,
            target,
            keys=table.keys,
            columns=table.columns,
            row_filter=expr,
            version=snapshot.version,
            commit_timestamp=snapshot.committed,
            # First sync, or a target to rebuild (another table at its path): the target becomes
            # the snapshot. Any other re-bootstrap (one after 'sharesync reset' included) closes
            # the open rows and keeps the history before.
            replace=(checkpoint is None and reason is not BootstrapReason.KEPT)
            or reason is BootstrapReason.TARGET_CHANGED,
            replay_from=snapshot.replay_from,
            rewrite_threshold=rewrite_threshold,
            conform=reason in _CONFORMS,
            record=record,
        )
        return Applied(history, _history_changes(history))
    row_filter = _row_filter(expr)
    match table.mode:
        case Mode.MERGE:
            written = replace_target(
                spark,
                staged,
                target,
                columns=table.columns,
                keys=table.keys,
                row_filter=row_filter,
                soft_delete=table.soft_delete,
                record=record,
            )
        case Mode.SNAPSHOT if checkpoint is None or reason in _REPLACING:
            # First sync, after 'sharesync reset' or a breaking change to rebuild: the schema is
            # replaced too.
            written = replace_target(spark, staged, target, columns=table.columns, row_filter=row_filter, record=record)
        case Mode.SNAPSHOT:
            written = apply_snapshot(spark, staged, target, columns=table.columns, row_filter=row_filter, record=record)
        case Mode.APPEND:
            # The change log continues after a gap (the snapshot lands as inserts at its version).
            # A rebuild after a breaking schema change keeps the log too, moved into the new schema,
            # and so do a reset and a re-created or rewound source (once its versions pass the log's:
            # the planner refuses it before); a full refresh keeps the rows before its version.
            keeps_log = checkpoint is not None and reason in _KEEPS_LOG
            after = checkpoint.version if keeps_log and checkpoint is not None else -1
            if snapshot.keep_after is not None:
                after = snapshot.keep_after
            return _append(
                spark, table, target, staged, expr, row_filter, after, conform=reason in _CONFORMS, record=record
            )
        case _:  # pragma: no cover
            raise AssertionError(table.mode)
    stats = DELTA.applied(written)
    return Applied(stats, _changes(table.mode, stats))


def apply_changes(
    spark: Spark,
    table: TableConfig,
    target: Location,
    staged: Location,
    expr: Expr | None,
    *,
    batch: VersionRange,
    replay_from: int | None,
    rewrite_threshold: float | None,
    record: str | None = None,
) -> Applied:
    """Apply a batch of changes: MERGE its net change per key, append its change rows, or give
    each version that changes a key its own history row."""
    if table.mode is Mode.HISTORY:
        history = apply_history(
            spark,
            staged,
            target,
            keys=table.keys,
            columns=table.columns,
            row_filter=expr,
            track_history=table.track_history,
            track_history_except=table.track_history_except,
            # A backfill rewrites history from its start in its first batch only: on a later one it
            # would remove what the earlier batches of the replay wrote.
            replay_from=replay_from if batch.start == replay_from else None,
            rewrite_threshold=rewrite_threshold,
            record=record,
        )
        return Applied(history, _history_changes(history))
    row_filter = _row_filter(expr)
    if table.mode is Mode.APPEND:
        return _append(spark, table, target, staged, expr, row_filter, batch.start - 1, record=record)
    if table.mode is not Mode.MERGE:  # pragma: no cover - snapshot mode never plans changes
        raise AssertionError(table.mode)
    if table.keys:  # staging's last step, before the job reads the batch (the job refuses no keys)
        net_staged_batch(staged, table.keys)
    stats = DELTA.applied(
        apply_merge(
            spark,
            staged,
            target,
            keys=table.keys,
            columns=table.columns,
            row_filter=row_filter,
            soft_delete=table.soft_delete,
            replay_from=replay_from,
            rewrite_threshold=rewrite_threshold,
            record=record,
        )
    )
    return Applied(stats, _changes(table.mode, stats))


def _append(
    spark: Spark,
    table: TableConfig,
    target: Location,
    staged: Location,
    expr: Expr | None,
    row_filter: Column | None,
    after: int,
    *,
    conform: bool = False,
    record: str | None = None,
) -> Applied:
    stats = DELTA.applied(apply_append(
        spark, staged, target, after_version=after, columns=table.columns, row_filter=row_filter, conform=conform,
        record=record,
    ))  # fmt: skip
    appended = appended_by_type(staged, expr, after) if stats.inserted else {}
    return Applied(stats, TargetChanges(Mode.APPEND, appended=MappingProxyType(appended)))


def appended_by_type(staged: Location, expr: Expr | None, after_version: int) -> dict[ChangeType, int]:
    """The staged change rows the append job keeps (above ``after_version``, passing the
    filter), counted by ``_change_type`` from the local files: the commit records only a total."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from sharesync.sync.predicates import to_arrow

    dataset = ds.dataset([f.path for f in staged_files(staged)], format="parquet", filesystem=staged.filesystem)
    keep = ds.field(COMMIT_VERSION) > after_version
    if expr is not None:
        keep = keep & to_arrow(expr, dataset.schema)
    types = dataset.to_table(columns=[CHANGE_TYPE], filter=keep).column(CHANGE_TYPE)
    counts = pc.value_counts(types).to_pylist()
    return {ChangeType(c["values"]): int(c["counts"]) for c in counts}


def _changes(mode: Mode, stats: ApplyStats) -> TargetChanges:
    if mode is Mode.SNAPSHOT:
        return TargetChanges(mode, written=stats.inserted)
    return TargetChanges(mode, stats.inserted, stats.updated, stats.deleted)


def _history_changes(stats: HistoryStats) -> TargetChanges:
    return TargetChanges(
        Mode.HISTORY, updated=stats.updated, deleted=stats.deleted, opened=stats.opened, closed=stats.closed
    )


def _row_filter(expr: Expr | None) -> Column | None:
    if expr is None:
        return None
    from sharesync.sync.predicates import to_spark

    return to_spark(expr)
