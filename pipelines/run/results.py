"""What a sync pass reports: per batch and per table. Shared by the CLI and the Dagster layer."""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import reduce

from sharesync.pipelines.modes.base import TargetChanges
from sharesync.pipelines.modes.registry import BUILTIN_MODES
from sharesync.state import RunStats
from sharesync.sync.core.config import Mode
from sharesync.sync.core.errors import ConfigError


class TableOutcome(StrEnum):
    UP_TO_DATE = "up_to_date"
    SYNCED = "synced"
    FAILED = "failed"
    # Tables an include: pattern selects that the pass does not sync; neither fails the pass.
    REMOVED = "removed_at_provider"  # gone from the provider's listing: target and checkpoint kept
    NEEDS_KEYS = "needs_keys"  # lacks the pattern's key columns and the pattern has no fallback_mode


class BatchKind(StrEnum):
    BOOTSTRAP = "bootstrap"
    CHANGES = "changes"


@dataclass(frozen=True)
class BackfillRequest:
    """Re-apply changes from a point in time (``sharesync backfill`` / Dagster run config)."""

    starting_timestamp: datetime
    ending_timestamp: datetime | None = None
    # Re-bootstrap from the snapshot at the resolved starting version instead of replaying changes.
    full_refresh: bool = False
    # A full refresh of an append target replaces its change log whole, not from the start on.
    discard_target: bool = False

    def __post_init__(self) -> None:
        if self.discard_target and not self.full_refresh:
            raise ConfigError(
                "discarding the target goes with a full refresh: add --full-refresh (run config: full_refresh)"
            )
        if self.ending_timestamp is not None and self.ending_timestamp < self.starting_timestamp:
            raise ConfigError(
                f"the backfill ends ({self.ending_timestamp.isoformat()}) before it starts "
                f"({self.starting_timestamp.isoformat()}); give an end at or after the start"
            )


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    kind: BatchKind
    start_version: int
    end_version: int
    stats: RunStats
    changes: TargetChanges
    seconds: float
    start_commit_timestamp: datetime | None = None
    end_commit_timestamp: datetime | None = None


@dataclass(frozen=True)
class TableSyncResult:
    name: str
    mode: Mode
    outcome: TableOutcome
    checkpoint_version: int | None
    source_version: int | None
    batches: tuple[BatchResult, ...] = ()
    warnings: tuple[str, ...] = ()
    error: str | None = None
    # A failure the next pass may not meet again (a lost connection, a busy engine); False for
    # one a person has to fix (config, credentials, a breaking schema change, a bug).
    transient: bool = False
    seconds: float = 0.0
    checkpoint_timestamp: datetime | None = None
    compaction: str | None = None  # what the upkeep after its batches did to the target (pipelines/run/upkeep.py)
    # The failure itself (``error`` is its redacted text): callers decide by type, e.g. the CLI
    # exits 2 for a ConfigError found at run time (a key not in the shared table), 1 otherwise.
    exception: Exception | None = field(default=None, repr=False, compare=False)

    @property
    def stats(self) -> RunStats:
        total = RunStats()
        for batch in self.batches:
            total = total + batch.stats
        return total

    @property
    def changes(self) -> TargetChanges:
        """What the batches did, in the mode's terms (none: the mode's zero)."""
        if not self.batches:
            return BUILTIN_MODES.of_mode(self.mode).no_changes()
        return reduce(operator.add, (batch.changes for batch in self.batches))

    @property
    def first_version(self) -> int | None:
        return self.batches[0].start_version if self.batches else None

    def to_json(self) -> dict[str, object]:
        """The ``sync --json`` / ``backfill --json`` shape of the row the results table prints,
        with every column (a narrow terminal may leave some out of the table)."""
        stats = self.stats
        return {
            "name": self.name,
            # A pattern's table without its keys has no mode until it gets them (or a fallback_mode).
            "mode": None if self.outcome is TableOutcome.NEEDS_KEYS else self.mode.value,
            "outcome": self.outcome.value,
            "first_version": self.first_version,
            "checkpoint_version": self.checkpoint_version,
            "source_version": self.source_version,
            "changes": self.changes.counts() if self.batches else {},
            "files_downloaded": stats.files_downloaded,
            "bytes_downloaded": stats.bytes_downloaded,
            "seconds": round(self.seconds, 3),
            "warnings": list(self.warnings),
            "compaction": self.compaction,
            "error": self.error,
            "transient": self.transient,
        }
