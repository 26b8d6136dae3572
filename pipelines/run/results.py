"""What a sync pass reports: per batch and per table. Shared by the CLI and the Dagster layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from sharesync.state import RunStats
from sharesync.sync.core.errors import SharesyncError


class TableOutcome(StrEnum):
    UP_TO_DATE = "up_to_date"
    SYNCED = "synced"
    FAILED = "failed"


@dataclass(frozen=True)
class BackfillRequest:
    """Re-apply changes from a point in time (``sharesync backfill`` / Dagster run config)."""

    starting_timestamp: datetime
    ending_timestamp: datetime | None = None
    # Re-bootstrap from the snapshot at the resolved starting version instead of replaying changes.
    full_refresh: bool = False


@dataclass(frozen=True)
class BatchResult:
    kind: str  # "bootstrap" | "changes"
    start_version: int
    end_version: int
    stats: RunStats
    seconds: float
    start_commit_timestamp: datetime | None = None
    end_commit_timestamp: datetime | None = None
    warning: str | None = None


@dataclass(frozen=True)
class TableSyncResult:
    name: str
    outcome: TableOutcome
    checkpoint_version: int | None
    source_version: int | None
    batches: tuple[BatchResult, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None
    seconds: float = 0.0
    checkpoint_timestamp: datetime | None = None
    target_rows: int | None = None
    columns: tuple[tuple[str, str], ...] = field(default=())  # (name, type) of the target's data columns
    # The failure itself (``error`` is its redacted text): callers decide by type, e.g. the CLI
    # exits 2 for a ConfigError found at run time (a key not in the shared table), 1 otherwise.
    exception: SharesyncError | None = field(default=None, repr=False, compare=False)

    @property
    def stats(self) -> RunStats:
        total = RunStats()
        for batch in self.batches:
            total = total + batch.stats
        return total

    @property
    def first_version(self) -> int | None:
        return self.batches[0].start_version if self.batches else None
