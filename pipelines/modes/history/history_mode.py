"""History mode's strategy: every image a key had, one row each, with its validity (SCD type 2).

A batch is staged per file (never netted: history keeps the versions between a batch's first and
last), planned against the target's rows in Arrow and written in one commit
(:mod:`.history_batch`). A snapshot is asked for at its version, so its rows open at its commit
time. Its account counts history rows opened and closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.modes.base import CONFORMS, Applied, BatchJob, BootstrapAt, TargetChanges
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.state import Checkpoint
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.history_columns import IS_CURRENT, VALID_FROM_VERSION, VALID_TO_VERSION
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange

if TYPE_CHECKING:
    from sharesync.pipelines.modes.history.history import HistoryStats


@dataclass(frozen=True, kw_only=True)
class HistoryChanges:
    """The rows ``opened`` and ``closed`` (one opened and closed within a batch counts in both),
    the existing rows ``updated`` (closed, reopened or updated in place) and ``deleted`` (removed:
    history a backfill rewrote, or the rows a replacing bootstrap dropped)."""

    opened: int = 0
    closed: int = 0
    updated: int = 0
    deleted: int = 0

    @classmethod
    def of(cls, stats: HistoryStats) -> HistoryChanges:
        return cls(opened=stats.opened, closed=stats.closed, updated=stats.updated, deleted=stats.deleted)

    def __add__(self, other: HistoryChanges) -> HistoryChanges:
        return HistoryChanges(
            opened=self.opened + other.opened,
            closed=self.closed + other.closed,
            updated=self.updated + other.updated,
            deleted=self.deleted + other.deleted,
        )

    def counts(self) -> dict[str, int]:
        return {
            "rows_opened": self.opened,
            "rows_closed": self.closed,
            "rows_changed": self.updated,
            "rows_removed": self.deleted,
        }

    def describe(self, *, compact: bool = False) -> str:
        if compact:
            return f"{self.opened} opened\n{self.closed} closed"
        removed = f", {self.deleted} removed" if self.deleted else ""
        return f"{self.opened} rows opened, {self.closed} closed{removed}"


class HistoryMode:
    nets_by_key = False
    direct_snapshot = False  # planned in Python
    dated_snapshot = True
    keyed = True
    copies_source = True  # its current rows
    current_flag: str | None = IS_CURRENT
    # A history row records the versions it opened and closed at.
    high_water_columns: tuple[str, ...] = (VALID_FROM_VERSION, VALID_TO_VERSION)
    keeps: str | None = "history"

    def describe_table(self, table: TableConfig) -> str:
        return f"as the history of every {', '.join(table.keys)}: one row per image, with its validity"

    def no_changes(self) -> TargetChanges:
        return HistoryChanges()

    def history_start(self, target: Location) -> int | None:
        return DELTA.history_start(target)

    def bootstrap(
        self, job: BatchJob, *, reason: BootstrapReason, checkpoint: Checkpoint | None, snapshot: BootstrapAt
    ) -> Applied:
        from sharesync.pipelines.modes.history.history_batch import bootstrap_history  # Arrow and Spark: only here

        stats = bootstrap_history(
            job.spark,
            job.staged,
            job.target,
            keys=job.table.keys,
            columns=job.table.columns,
            row_filter=job.expr,
            version=snapshot.version,
            commit_timestamp=snapshot.committed,
            # First sync, or a target to rebuild (another table at its path): the target becomes
            # the snapshot. Any other re-bootstrap (one after 'sharesync reset' included) closes
            # the open rows and keeps the history before.
            replace=(checkpoint is None and reason is not BootstrapReason.KEPT)
            or reason is BootstrapReason.TARGET_CHANGED,
            replay_from=snapshot.replay_from,
            rewrite_threshold=job.rewrite_threshold,
            conform=reason in CONFORMS,
            record=job.record,
            deletion_vectors=job.deletion_vectors,
        )
        return Applied(stats, HistoryChanges.of(stats))

    def changes(self, job: BatchJob, *, batch: VersionRange, replay_from: int | None) -> Applied:
        from sharesync.pipelines.modes.history.history_batch import apply_history  # Arrow and Spark: only here

        table = job.table
        stats = apply_history(
            job.spark,
            job.staged,
            job.target,
            keys=table.keys,
            columns=table.columns,
            row_filter=job.expr,
            track_history=table.track_history,
            track_history_except=table.track_history_except,
            # A backfill rewrites history from its start in its first batch only: on a later one it
            # would remove what the earlier batches of the replay wrote.
            replay_from=replay_from if batch.start == replay_from else None,
            rewrite_threshold=job.rewrite_threshold,
            record=job.record,
            deletion_vectors=job.deletion_vectors,
        )
        return Applied(stats, HistoryChanges.of(stats))
