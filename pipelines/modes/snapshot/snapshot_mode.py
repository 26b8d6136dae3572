"""Snapshot mode's strategy: the target is the provider's snapshot at each version it syncs.

It never applies changes (the planner bootstraps every new version); a first sync, a reset or a
rebuild replaces the schema too, any other snapshot overwrites the rows. Its account counts rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.pipelines.modes.base import Applied, BatchJob, BootstrapAt, TargetChanges
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.guard_columns import VERSION_COLUMN
from sharesync.state import Checkpoint
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange

# Bootstraps that make a snapshot-mode target the snapshot, schema included.
_REPLACING = (BootstrapReason.TARGET_CHANGED, BootstrapReason.SCHEMA_CHANGED)


@dataclass(frozen=True, kw_only=True)
class SnapshotChanges:
    """The rows ``written``."""

    written: int = 0

    def __add__(self, other: SnapshotChanges) -> SnapshotChanges:
        return SnapshotChanges(written=self.written + other.written)

    def counts(self) -> dict[str, int]:
        return {"rows_written": self.written}

    def describe(self, *, compact: bool = False) -> str:
        return f"{self.written} rows written"


class SnapshotMode:
    nets_by_key = False
    direct_snapshot = True
    dated_snapshot = False
    keyed = False
    copies_source = True
    current_flag: str | None = None
    high_water_columns: tuple[str, ...] = (VERSION_COLUMN,)
    keeps: str | None = None

    def describe_table(self, table: TableConfig) -> str:
        return "as a full snapshot per version"

    def no_changes(self) -> TargetChanges:
        return SnapshotChanges()

    def history_start(self, target: Location) -> int | None:
        return None

    def bootstrap(
        self, job: BatchJob, *, reason: BootstrapReason, checkpoint: Checkpoint | None, snapshot: BootstrapAt
    ) -> Applied:
        from sharesync.pipelines.modes.snapshot.snapshot import apply_snapshot, replace_target  # Spark: only here

        # First sync, after 'sharesync reset' or a breaking change to rebuild: the schema is replaced too.
        write = replace_target if checkpoint is None or reason in _REPLACING else apply_snapshot
        written = write(
            job.spark,
            job.staged,
            job.target,
            columns=job.table.columns,
            row_filter=job.row_filter,
            record=job.record,
            deletion_vectors=job.deletion_vectors,
        )
        stats = DELTA.applied(written)
        return Applied(stats, SnapshotChanges(written=stats.inserted))

    def changes(self, job: BatchJob, *, batch: VersionRange, replay_from: int | None) -> Applied:
        raise AssertionError("snapshot mode never plans changes")  # pragma: no cover
