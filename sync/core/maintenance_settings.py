"""How sharesync keeps its targets healthy: when it compacts one by itself, and the scheduled job.

``defaults.maintenance`` (or a table's own ``maintenance``) says when a target is worth
compacting and whether a sync does it after a batch (``compact: auto``, the default); the
top-level ``maintenance_job`` is the Dagster job that compacts and vacuums every target on a
schedule. docs/maintenance.md says why the defaults are what they are.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from sharesync.sync.core.strict_model import StrictModel, validate_cron

__all__ = ["DEFAULT_RETAIN_HOURS", "MaintenanceJob", "MaintenanceSettings"]

# Delta's own default (delta.deletedFileRetentionDuration): a reader that started on a version up
# to this long ago still finds its files, and so do time travel and sharesync's own identity check.
DEFAULT_RETAIN_HOURS = 168


class MaintenanceSettings(StrictModel):
    """When a target is worth compacting (any one threshold reached), and whether a sync does it."""

    compact: Literal["auto", "off"] = Field(
        default="auto", description="auto: compact after a batch that leaves the target past a threshold"
    )
    deleted_ratio: float = Field(default=0.10, gt=0, le=1, description="rows hidden by deletion vectors, of all")
    files: int = Field(default=200, ge=2, description="data files in the target's current version")
    small_files: int = Field(default=32, ge=2, description="files under small_file_mib")
    small_file_mib: float = Field(default=32, gt=0, description="a file under this size is small")


class MaintenanceJob(StrictModel):
    """The Dagster job ``sharesync_maintenance``: compaction where due, then vacuum, every table."""

    schedule: str | None = Field(default=None, description="cron; none: the job runs when launched by hand")
    vacuum: bool = True
    retain_hours: int = Field(default=DEFAULT_RETAIN_HOURS, ge=1, description="vacuum keeps files this recent")

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return validate_cron(value)
