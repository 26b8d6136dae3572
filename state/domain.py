"""What the state store hands out: small frozen values, never ORM rows.

Callers (the engine, ``sharesync status``, the Dagster layer) must not be able to mutate a
checkpoint and "save" it behind the store's back, nor hold a row bound to a closed
session; so every read returns one of these immutable snapshots, and every write takes
them. All timestamps are aware UTC: the store refuses naive datetimes because a naive
value is ambiguous across machines and would silently shift lease expiries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum


def _require_aware(name: str, value: datetime | None) -> None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValueError(f"{name} must be timezone-aware (UTC), got naive {value.isoformat()}")


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The last source version fully applied to a table's target.

    ``table_id`` is the provider's ``metaData.id``: when it changes the provider re-created
    the table, version numbers restart, and the target must be re-bootstrapped. That is
    also the only case in which a checkpoint may move to a *lower* version.
    ``updated_at`` is set by the store on every write; leave it ``None`` when building one.
    """

    name: str
    version: int
    table_id: str
    schema_fingerprint: str
    target: str
    mode: str
    version_timestamp: datetime | None = None
    updated_at: datetime | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("checkpoint name must not be empty")
        if self.version < 0:
            raise ValueError(f"checkpoint version must be >= 0, got {self.version}")
        _require_aware("version_timestamp", self.version_timestamp)
        _require_aware("updated_at", self.updated_at)
        # Normalise to UTC so equal instants compare equal whatever zone the caller used.
        object.__setattr__(self, "version_timestamp", _utc(self.version_timestamp))
        object.__setattr__(self, "updated_at", _utc(self.updated_at))


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RunStats:
    """Counters of one sync run. ``a + b`` sums them, so batches can be accumulated."""

    rows_inserted: int = 0
    rows_updated: int = 0
    rows_deleted: int = 0
    files_downloaded: int = 0
    bytes_downloaded: int = 0
    url_refreshes: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 0:
                raise ValueError(f"RunStats.{f.name} must be >= 0, got {value}")

    def __add__(self, other: RunStats) -> RunStats:
        return RunStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One row of run history: a sync batch of one table, from start to finish."""

    id: int
    table: str
    status: RunStatus
    start_version: int | None
    end_version: int | None
    started_at: datetime
    finished_at: datetime | None = None
    stats: RunStats = field(default_factory=RunStats)
    error: str | None = None
    # What a run that succeeded still has to say (e.g. "re-bootstrapped: history gap").
    note: str | None = None

    @property
    def duration(self) -> timedelta | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that one owner may sync ``name`` until ``expires_at``.

    ``token`` is unique per acquisition (a fencing token): renewing, releasing and
    lease-guarded checkpoint advances check it, so a holder that stalled past its expiry and
    was taken over cannot act on the old lease, even if it reuses the same owner name.
    """

    name: str
    owner: str
    token: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime

    @property
    def ttl(self) -> timedelta:
        """The time-to-live granted by the last acquire or renew."""
        return self.expires_at - self.renewed_at

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at
