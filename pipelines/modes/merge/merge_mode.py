"""Merge mode's strategy: one current row per key, each batch MERGEd as its net change per key.

A batch of changes is netted per key in staging (as it downloads, or here before the job when it
was staged otherwise); a bootstrap replaces the target with the snapshot. Its account counts keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.pipelines.modes.base import Applied, BatchJob, BootstrapAt, TargetChanges
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import ApplyStats
from sharesync.pipelines.targets.guard_columns import VERSION_COLUMN
from sharesync.state import Checkpoint
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange


@dataclass(frozen=True, kw_only=True)
class MergeChanges:
    """Keys ``inserted``, ``updated``, ``deleted`` (a soft delete counts as deleted; a bootstrap
    that replaces the target deletes the rows it held)."""

    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    @classmethod
    def of(cls, stats: ApplyStats) -> MergeChanges:
        return cls(inserted=stats.inserted, updated=stats.updated, deleted=stats.deleted)

    def __add__(self, other: MergeChanges) -> MergeChanges:
        return MergeChanges(
            inserted=self.inserted + other.inserted,
            updated=self.updated + other.updated,
            deleted=self.deleted + other.deleted,
        )

    def counts(self) -> dict[str, int]:
        return {"rows_inserted": self.inserted, "rows_updated": self.updated, "rows_deleted": self.deleted}

    def describe(self, *, compact: bool = False) -> str:
        if compact:
            return f"+{self.inserted} ~{self.updated} -{self.deleted} keys"
        return f"{self.inserted} keys inserted, {self.updated} updated, {self.deleted} deleted"


class MergeMode:
    nets_by_key = True
    direct_snapshot = True
    dated_snapshot = False
    keyed = True
    copies_source = True
    current_flag: str | None = None
    high_water_columns: tuple[str, ...] = (VERSION_COLUMN,)
    keeps: str | None = None

    def describe_table(self, table: TableConfig) -> str:
        return f"merged on {', '.join(table.keys)}" + (" with soft deletes" if table.soft_delete else "")

    def no_changes(self) -> TargetChanges:
        return MergeChanges()

    def history_start(self, target: Location) -> int | None:
        return None

    def bootstrap(
        self, job: BatchJob, *, reason: BootstrapReason, checkpoint: Checkpoint | None, snapshot: BootstrapAt
    ) -> Applied:
        from sharesync.pipelines.modes.snapshot.snapshot import replace_target  # Spark: only when a batch is applied

        table = job.table
        written = replace_target(
            job.spark,
            job.staged,
            job.target,
            columns=table.columns,
            keys=table.keys,
            row_filter=job.row_filter,
            soft_delete=table.soft_delete,
            record=job.record,
            deletion_vectors=job.deletion_vectors,
        )
        stats = DELTA.applied(written)
        return Applied(stats, MergeChanges.of(stats))

    def changes(self, job: BatchJob, *, batch: VersionRange, replay_from: int | None) -> Applied:
        from sharesync.pipelines.modes.merge.merge import apply_merge  # Spark: only when a batch is applied

        table = job.table
        written = apply_merge(
            job.spark,
            job.staged,
            job.target,
            keys=table.keys,
            columns=table.columns,
            row_filter=job.row_filter,
            soft_delete=table.soft_delete,
            replay_from=replay_from,
            rewrite_threshold=job.rewrite_threshold,
            record=job.record,
            deletion_vectors=job.deletion_vectors,
        )
        stats = DELTA.applied(written)
        return Applied(stats, MergeChanges.of(stats))
