"""Append mode's strategy: the target is the change log, every change row appended once.

A batch is staged per file (never netted: every row is kept); a bootstrap lands the snapshot as
``insert`` rows at its version. Its account counts the appended rows by ``_change_type``, read
from the staged files: the commit records only a total.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from sharesync.pipelines.modes.base import CONFORMS, Applied, BatchJob, BootstrapAt, TargetChanges
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.state import Checkpoint
from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_VERSION, ChangeType
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange
from sharesync.sync.predicates import Expr

# Bootstraps an append target's change log continues through (the snapshot lands as inserts).
# (A table without a change feed never bootstraps one: the planner refuses it.)
_KEEPS_LOG = (BootstrapReason.HISTORY_GAP, BootstrapReason.SCHEMA_CHANGED)


@dataclass(frozen=True, kw_only=True)
class AppendChanges:
    """The change rows ``appended``, by ``_change_type``."""

    appended: Mapping[ChangeType, int] = field(default_factory=lambda: MappingProxyType({}))

    def __add__(self, other: AppendChanges) -> AppendChanges:
        summed = {t: self.appended.get(t, 0) + other.appended.get(t, 0) for t in ChangeType}
        return AppendChanges(appended=MappingProxyType({t: n for t, n in summed.items() if n}))

    @property
    def appended_rows(self) -> int:
        return sum(self.appended.values())

    def counts(self) -> dict[str, int]:
        by_type = {f"appended_{t.value}": self.appended.get(t, 0) for t in ChangeType}
        return {"change_rows_appended": self.appended_rows, **by_type}

    def describe(self, *, compact: bool = False) -> str:
        rows = self.appended
        if not compact:
            types = ", ".join(f"{rows.get(t, 0)} {t.value}" for t in ChangeType)
            return f"{self.appended_rows} change rows appended ({types})"
        # An update is two rows (its pre- and post-image): "upd" counts rows, as the total does.
        kinds = {
            "ins": rows.get(ChangeType.INSERT, 0),
            "upd": rows.get(ChangeType.UPDATE_PREIMAGE, 0) + rows.get(ChangeType.UPDATE_POSTIMAGE, 0),
            "del": rows.get(ChangeType.DELETE, 0),
        }
        by_type = " ".join(f"{n} {kind}" for kind, n in kinds.items() if n)
        return f"{self.appended_rows} rows appended" + (f"\n{by_type}" if by_type else "")


class AppendMode:
    nets_by_key = False
    direct_snapshot = False  # the snapshot is re-encoded as change rows
    dated_snapshot = False
    keyed = False
    copies_source = False  # a change log, not a copy of a snapshot
    current_flag: str | None = None
    high_water_columns: tuple[str, ...] = (COMMIT_VERSION,)
    keeps: str | None = "change log"

    def describe_table(self, table: TableConfig) -> str:
        return "as an append-only change log"

    def no_changes(self) -> TargetChanges:
        return AppendChanges()

    def history_start(self, target: Location) -> int | None:
        return None

    def bootstrap(
        self, job: BatchJob, *, reason: BootstrapReason, checkpoint: Checkpoint | None, snapshot: BootstrapAt
    ) -> Applied:
        # The change log continues after a gap (the snapshot lands as inserts at its version).
        # A rebuild after a breaking schema change keeps the log too, moved into the new schema,
        # and so do a reset and a re-created or rewound source (once its versions pass the log's:
        # the planner refuses it before); a full refresh keeps the rows before its version.
        keeps_log = checkpoint is not None and reason in _KEEPS_LOG
        after = checkpoint.version if keeps_log and checkpoint is not None else -1
        if snapshot.keep_after is not None:
            after = snapshot.keep_after
        return _append(job, after, conform=reason in CONFORMS)

    def changes(self, job: BatchJob, *, batch: VersionRange, replay_from: int | None) -> Applied:
        return _append(job, batch.start - 1)


def _append(job: BatchJob, after: int, *, conform: bool = False) -> Applied:
    from sharesync.pipelines.modes.append.append import apply_append  # Spark: only when a batch is applied

    written = apply_append(
        job.spark,
        job.staged,
        job.target,
        after_version=after,
        columns=job.table.columns,
        row_filter=job.row_filter,
        conform=conform,
        record=job.record,
        deletion_vectors=job.deletion_vectors,
    )
    stats = DELTA.applied(written)
    appended = appended_by_type(job.staged, job.expr, after) if stats.inserted else {}
    return Applied(stats, AppendChanges(appended=MappingProxyType(appended)))


def appended_by_type(staged: Location, expr: Expr | None, after_version: int) -> dict[ChangeType, int]:
    """The staged change rows the append job keeps (above ``after_version``, passing the
    filter), counted by ``_change_type`` from the local files: the commit records only a total."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    from sharesync.pipelines.jobs.staged import staged_files
    from sharesync.sync.predicates import to_arrow

    dataset = ds.dataset([f.path for f in staged_files(staged)], format="parquet", filesystem=staged.filesystem)
    keep = ds.field(COMMIT_VERSION) > after_version
    if expr is not None:
        keep = keep & to_arrow(expr, dataset.schema)
    types = dataset.to_table(columns=[CHANGE_TYPE], filter=keep).column(CHANGE_TYPE)
    counts = pc.value_counts(types).to_pylist()
    return {ChangeType(c["values"]): int(c["counts"]) for c in counts}
