"""What the state store hands out: small frozen values, never ORM rows.

Callers (the syncer, ``sharesync status``, the Dagster layer) must not be able to mutate a
checkpoint and "save" it behind the store's back, nor hold a row bound to a closed
session; so every read returns one of these immutable snapshots, and every write takes
them. All timestamps are aware UTC: the store refuses naive datetimes because a naive
value is ambiguous across machines and would silently shift lease expiries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import get_args, get_type_hints


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

    The ``target_*`` fields tie the checkpoint to the target state it was written for, so a
    target that was deleted, replaced or restored to an older version can be told apart from
    the one this checkpoint describes: the target Delta table's id, the target version of the
    commit that applied the batch, and the mode it was written in. ``None`` means not known
    (checkpoints written before sharesync recorded them, until their next batch).
    """

    name: str
    version: int
    table_id: str
    schema_fingerprint: str
    target: str
    mode: str
    version_timestamp: datetime | None = None
    updated_at: datetime | None = None
    target_table_id: str | None = None
    target_version: int | None = None
    target_mode: str | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("checkpoint name must not be empty")
        if self.version < 0:
            raise ValueError(f"checkpoint version must be >= 0, got {self.version}")
        if self.target_version is not None and self.target_version < 0:
            raise ValueError(f"target version must be >= 0, got {self.target_version}")
        _require_aware("version_timestamp", self.version_timestamp)
        _require_aware("updated_at", self.updated_at)
        # Normalise to UTC so equal instants compare equal whatever zone the caller used.
        object.__setattr__(self, "version_timestamp", _utc(self.version_timestamp))
        object.__setattr__(self, "updated_at", _utc(self.updated_at))


# A checkpoint row's columns are the fields of Checkpoint, by the same names: the store's select
# (state/checkpoints.py) and the no-op path's stdlib read (state/sqlite.py) both take this list.
CHECKPOINT_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Checkpoint))


def stored_utc(value: datetime) -> datetime:
    """A stored timestamp as aware UTC: the store writes naive UTC where the database keeps no zone."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def checkpoint_from_row(values: Sequence[object]) -> Checkpoint:
    """The checkpoint a row holds, its values in :data:`CHECKPOINT_COLUMNS` order: typed as SQLAlchemy
    returns them, or raw as ``sqlite3`` does (timestamps as text). TypeError or ValueError when a
    value does not fit its field — the one decoding of a checkpoint row, for both readers."""
    decoded = {name: _READERS[name](value) for name, value in zip(CHECKPOINT_COLUMNS, values, strict=True)}
    return Checkpoint(**decoded)  # type: ignore[arg-type]  # each value's type checked by its column's reader


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{value!r} is not text")
    return value


def _integer(value: object) -> int:
    if not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _timestamp(value: object) -> datetime:
    return stored_utc(value if isinstance(value, datetime) else datetime.fromisoformat(_text(value)))


def _reader(kind: object) -> Callable[[object], object]:
    """How a column whose Checkpoint field has type ``kind`` is read."""
    read: dict[object, Callable[[object], object]] = {str: _text, int: _integer, datetime: _timestamp}
    if type(None) not in get_args(kind):
        return read[kind]
    (base,) = (arg for arg in get_args(kind) if arg is not type(None))
    return lambda value: None if value is None else read[base](value)


# Per column, its reader: a field added to Checkpoint (and so to CHECKPOINT_COLUMNS) is read here too.
_READERS = {name: _reader(kind) for name, kind in get_type_hints(Checkpoint).items()}


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
class Holder:
    """The process that holds a lease, as its own host names it.

    A pid alone does not identify a process: pids are reused. ``started`` (the process's start
    time in clock ticks after boot) tells a newer process with the same pid apart. And pids
    only compare within one kernel boot and one pid namespace (a container has its own), which
    ``namespace`` names. ``None`` where the host does not say (no ``/proc``): then nobody can
    tell whether the holder lives, and its lease ends by its ttl.
    """

    host: str
    pid: int
    started: int | None = None
    namespace: str | None = None

    def __post_init__(self) -> None:
        if self.pid <= 0:
            raise ValueError(f"holder pid must be positive, got {self.pid}")

    def __str__(self) -> str:
        return f"{self.host}:{self.pid}"


@dataclass(frozen=True, slots=True)
class Lease:
    """Proof that one owner may sync ``name`` until ``expires_at``.

    ``token`` is unique per acquisition (a fencing token): renewing, releasing and
    lease-guarded checkpoint advances check it, so a holder that stalled past its expiry and
    was taken over cannot act on the old lease, even if it reuses the same owner name.
    ``holder`` is the acquiring process (``None`` on leases stored before it was recorded): a
    contender on the same host may take the lease over at once when that process is gone.
    """

    name: str
    owner: str
    token: str
    acquired_at: datetime
    renewed_at: datetime
    expires_at: datetime
    holder: Holder | None = None

    @property
    def ttl(self) -> timedelta:
        """The time-to-live granted by the last acquire or renew."""
        return self.expires_at - self.renewed_at

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at


@dataclass(frozen=True, slots=True)
class Takeover:
    """A lease taken before its expiry because its holder's process was found dead on this host.

    The dead holder's runs still marked running were closed as abandoned in the same
    transaction (``abandoned_runs``); the new holder resumes at the stored checkpoint.
    """

    name: str
    holder: Holder
    owner: str
    expires_at: datetime
    abandoned_runs: tuple[int, ...] = ()

    def __str__(self) -> str:
        said = f"took over the lease of {self.name} from dead process {self.holder} (owner {self.owner})"
        if not self.abandoned_runs:
            return said
        runs = ", ".join(map(str, self.abandoned_runs))
        return f"{said}; closed its unfinished run{'s' * (len(self.abandoned_runs) > 1)} {runs} as abandoned"


@dataclass(frozen=True, slots=True)
class PendingQuery:
    """An asynchronous query submitted for a table and not yet read to the end.

    ``request_key`` tells the request apart (a digest of its body); ``query_id`` is None
    between recording the key and the provider's answer: resubmitting with the same
    ``idempotency_key`` then maps to the same query on a server that deduplicates.
    """

    table: str
    request_key: str
    idempotency_key: str
    query_id: str | None = None
    start_version: int | None = None
    end_version: int | None = None
    submitted_at: datetime | None = None
