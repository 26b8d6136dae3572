"""Is a target still healthy to read? Its shape from the log, and the pure rule that says when to compact.

Merge-on-read targets (deletion vectors) and small incremental batches leave a table that is
cheap to write and slow to read: many small files, and rows every reader must skip. The facts
come from the table's log (:func:`sharesync.pipelines.targets.delta.maintenance_facts.read_health`),
never from its rows; the decision here reads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sharesync.sync.core.maintenance_settings import MaintenanceSettings

__all__ = [
    "MIB",
    "Compacted",
    "TargetHealth",
    "Vacuumed",
    "Thresholds",
    "auto_compaction_reason",
    "compaction_reason",
    "needs_compaction",
]

MIB = 1024 * 1024


@dataclass(frozen=True)
class TargetHealth:
    """One version of a target as its log describes it."""

    version: int
    files: int
    bytes: int
    small_files: int  # files under the thresholds' small-file size
    rows: int  # rows in the files, those deletion vectors hide included
    deleted_rows: int  # rows deletion vectors hide
    files_with_deletion_vectors: int
    last_compaction: datetime | None  # the newest compaction the log still shows (None: none seen)

    @property
    def live_rows(self) -> int:
        return self.rows - self.deleted_rows

    @property
    def deleted_ratio(self) -> float:
        """The share of the files' rows that readers read only to skip."""
        return self.deleted_rows / self.rows if self.rows else 0.0

    def describe(self) -> str:
        compacted = self.last_compaction.isoformat(timespec="seconds") if self.last_compaction else "never"
        return (
            f"{self.files} files ({self.small_files} small), {self.bytes / MIB:.1f} MiB, {self.live_rows} rows, "
            f"{self.deleted_rows} deleted by deletion vectors ({self.deleted_ratio:.1%}), last compacted {compacted}"
        )


@dataclass(frozen=True)
class Thresholds:
    """When a target is worth compacting: any one of these reached."""

    deleted_ratio: float = 0.10  # rows hidden by deletion vectors, of all rows in the files
    files: int = 200
    small_files: int = 32
    small_file_bytes: int = 32 * MIB  # Delta's OPTIMIZE aims at 1 GiB; a file under this is small

    @classmethod
    def of(cls, settings: MaintenanceSettings) -> Thresholds:
        """The thresholds a table's ``maintenance`` settings name."""
        return cls(settings.deleted_ratio, settings.files, settings.small_files, round(settings.small_file_mib * MIB))


def compaction_reason(health: TargetHealth, thresholds: Thresholds) -> str | None:
    """Why ``health`` calls for a compaction; None when it does not (or when one would change nothing)."""
    if health.deleted_rows and health.deleted_ratio >= thresholds.deleted_ratio:
        return f"{health.deleted_ratio:.1%} of its rows are deleted by deletion vectors (threshold {thresholds.deleted_ratio:.0%})"
    if health.files <= 1:
        return None  # one file (or none): nothing to fold together
    if health.small_files >= thresholds.small_files:
        return f"{health.small_files} small files (threshold {thresholds.small_files})"
    if health.files >= thresholds.files:
        return f"{health.files} files (threshold {thresholds.files})"
    return None


def auto_compaction_reason(health: TargetHealth, thresholds: Thresholds) -> str | None:
    """After a batch: as :func:`compaction_reason`, but never for a target smaller than one
    well-sized file — it reads in one go whatever its shape, and compacting it after every
    batch would cost more than readers save."""
    if health.bytes < thresholds.small_file_bytes:
        return None
    return compaction_reason(health, thresholds)


def needs_compaction(health: TargetHealth, thresholds: Thresholds) -> bool:
    return compaction_reason(health, thresholds) is not None


@dataclass(frozen=True)
class Compacted:
    """What a compaction did: the target before and after, and how (the engine's statement or a rewrite)."""

    before: TargetHealth
    after: TargetHealth
    how: str


@dataclass(frozen=True)
class Vacuumed:
    """Files a vacuum removed (``None``: the engine does not say), and how."""

    files: int | None
    how: str
