"""What a sync pass reports: per batch and per table. Shared by the CLI and the Dagster layer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType

from sharesync.state import RunStats
from sharesync.sync.core.changefeed import ChangeType
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


@dataclass(frozen=True)
class TargetChanges:
    """What batches did to the target, in the terms of the table's mode.

    merge: keys ``inserted``, ``updated``, ``deleted`` (a soft delete counts as deleted; a
    bootstrap that replaces the target deletes the rows it held). append: the change rows
    ``appended``, by ``_change_type``. snapshot: the rows ``written``. history: the rows
    ``opened`` and ``closed`` (one opened and closed within a batch counts in both), the existing
    rows ``updated`` (closed, reopened or updated in place) and ``deleted`` (removed: history a
    backfill rewrote, or the rows a replacing bootstrap dropped).
    """

    mode: Mode
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    appended: Mapping[ChangeType, int] = field(default_factory=lambda: MappingProxyType({}))
    written: int = 0
    opened: int = 0
    closed: int = 0

    def __add__(self, other: TargetChanges) -> TargetChanges:
        appended = {t: self.appended.get(t, 0) + other.appended.get(t, 0) for t in ChangeType}
        return TargetChanges(
            self.mode,
            self.inserted + other.inserted,
            self.updated + other.updated,
            self.deleted + other.deleted,
            MappingProxyType({t: n for t, n in appended.items() if n}),
            self.written + other.written,
            self.opened + other.opened,
            self.closed + other.closed,
        )

    @property
    def appended_rows(self) -> int:
        return sum(self.appended.values())

    def counts(self) -> dict[str, int]:
        """The mode's counters under names that say what they count (Dagster metadata keys)."""
        match self.mode:
            case Mode.MERGE:
                return {"rows_inserted": self.inserted, "rows_updated": self.updated, "rows_deleted": self.deleted}
            case Mode.APPEND:
                by_type = {f"appended_{t.value}": self.appended.get(t, 0) for t in ChangeType}
                return {"change_rows_appended": self.appended_rows, **by_type}
            case Mode.SNAPSHOT:
                return {"rows_written": self.written}
            case Mode.HISTORY:
                return {
                    "rows_opened": self.opened,
                    "rows_closed": self.closed,
                    "rows_changed": self.updated,
                    "rows_removed": self.deleted,
                }
        raise AssertionError(self.mode)  # pragma: no cover

    def describe(self, *, compact: bool = False) -> str:
        """What the batches did, in the mode's terms: keys (merge), change rows by type (append),
        rows (snapshot), rows opened and closed (history). In words for logs and the Dagster run
        summary; ``compact``: a cell of the CLI's results table (80 columns, at most two lines)."""
        match self.mode:
            case Mode.MERGE:
                if compact:
                    return f"+{self.inserted} ~{self.updated} -{self.deleted} keys"
                return f"{self.inserted} keys inserted, {self.updated} updated, {self.deleted} deleted"
            case Mode.APPEND:
                return self._describe_appended(compact)
            case Mode.SNAPSHOT:
                return f"{self.written} rows written"
            case Mode.HISTORY:
                if compact:
                    return f"{self.opened} opened\n{self.closed} closed"
                removed = f", {self.deleted} removed" if self.deleted else ""
                return f"{self.opened} rows opened, {self.closed} closed{removed}"
        raise AssertionError(self.mode)  # pragma: no cover

    def _describe_appended(self, compact: bool) -> str:
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


@dataclass(frozen=True)
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
        total = TargetChanges(self.mode)
        for batch in self.batches:
            total = total + batch.changes
        return total

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
            "error": self.error,
            "transient": self.transient,
        }
