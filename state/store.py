"""The state store: per-table checkpoints, run history and leases, in SQLite or PostgreSQL.

It is what makes sync exactly-once and observable, so it promises little and keeps it:

``open_store(url)``
    validates the URL (:class:`ConfigError` for an unknown scheme), creates a SQLite file's
    directory, refuses a schema written by a newer sharesync (:class:`StateSchemaTooNew`,
    nothing written) and applies pending migrations (once, under a lock, however many
    processes open the store at the same moment).

Checkpoints — compare-and-swap, never read-modify-write
    ``advance_checkpoint(new, expected_version=v)`` is one ``UPDATE … WHERE version = v``;
    whoever loses gets :class:`CheckpointConflict` and must re-plan from the stored
    checkpoint. ``expected_version=None`` means "must not exist yet" (bootstrap). A version
    only moves backwards together with a new source ``table_id`` (provider re-created the
    table). Given a ``lease``, the advance also fails with :class:`LeaseHeld` unless that
    lease is still held, checked under a row lock in the same transaction (fencing).

Leases — at most one sync per table, across processes and machines
    Acquire is a single conditional upsert (``INSERT … ON CONFLICT DO UPDATE … WHERE the
    old lease expired OR has the same owner``), so the database decides every race; losers
    get :class:`LeaseHeld` naming the holder and the expiry. Renew and release match the
    per-acquisition token. A crashed holder stops renewing, its lease expires, the next
    acquire takes over: no manual cleanup. :meth:`StateStore.hold_lease` renews from a
    heartbeat thread while work runs.

Run history
    ``start_run`` / ``finish_run`` rows with counters and redacted error text. A run left
    ``running`` by a crashed process is marked failed when the next run of that table starts
    (callers start runs only while holding the table's lease, so the old one must be dead).

Time
    Every "now" comes from one clock per store: the database server's clock on PostgreSQL
    (processes on different machines must not disagree about expiry), the local clock on
    SQLite (the file is local, so the same clock), or an injected ``clock`` (tests). It is
    read once per transaction and passed into SQL; the comparisons happen in the database.

Failures
    Driver errors become :class:`StateStoreUnavailable` (connection, lock timeout, read-only
    file) or :class:`StateError`; messages show the URL with its password masked.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, or_, select, text, update

from sharesync.state.domain import Checkpoint, Lease, RunRecord, RunStats, RunStatus
from sharesync.state.engine import Database, database_for, parse_url, prepare_sqlite_file
from sharesync.state.lease import LeaseKeeper, default_owner, hold_lease
from sharesync.state.migrate import ensure_schema
from sharesync.state.models import CheckpointRow, LeaseRow, RunRow
from sharesync.sync.core.errors import CheckpointConflict, LeaseHeld, StateError
from sharesync.sync.core.redact import redact

Clock = Callable[[], datetime]
AnyRow = Row[*tuple[Any, ...]]

# Stored error text is for people reading `status`; a full Spark trace would bloat every row.
MAX_ERROR_CHARS = 8_000

ABANDONED = (
    "abandoned: a newer run of this table started, so the process running this one stopped "
    "without finishing (crash, kill, or lost lease)"
)

_RUN_COLUMNS = (
    RunRow.id,
    RunRow.table_name,
    RunRow.status,
    RunRow.start_version,
    RunRow.end_version,
    RunRow.started_at,
    RunRow.finished_at,
    RunRow.rows_inserted,
    RunRow.rows_updated,
    RunRow.rows_deleted,
    RunRow.files_downloaded,
    RunRow.bytes_downloaded,
    RunRow.url_refreshes,
    RunRow.error,
    RunRow.note,
)
_CHECKPOINT_COLUMNS = (
    CheckpointRow.name,
    CheckpointRow.version,
    CheckpointRow.table_id,
    CheckpointRow.schema_fingerprint,
    CheckpointRow.target,
    CheckpointRow.mode,
    CheckpointRow.version_timestamp,
    CheckpointRow.updated_at,
)
_LEASE_COLUMNS = (
    LeaseRow.name,
    LeaseRow.owner,
    LeaseRow.token,
    LeaseRow.acquired_at,
    LeaseRow.renewed_at,
    LeaseRow.expires_at,
)


def open_store(url: str, *, clock: Clock | None = None) -> StateStore:
    """Open (creating and migrating as needed) the state store at ``url``.

    Engines are shared per URL within a process, so opening is cheap after the first time.
    """
    parsed = parse_url(url)
    prepare_sqlite_file(parsed)
    db = database_for(parsed)
    ensure_schema(db)
    return StateStore(db, clock=clock)


class StateStore:
    """Checkpoints, run history and leases; see the module docstring for the guarantees."""

    def __init__(self, db: Database, *, clock: Clock | None = None) -> None:
        self._db = db
        self._clock = clock

    @property
    def url(self) -> str:
        """The store's URL with the password masked (safe to print)."""
        return self._db.display_url

    def __repr__(self) -> str:
        return f"StateStore({self.url!r})"

    # -- time -------------------------------------------------------------------------------

    def _now(self, conn: Connection) -> datetime:
        if self._clock is not None:
            now = self._clock()
            if now.tzinfo is None:
                raise ValueError("the injected clock returned a naive datetime; return aware UTC")
            return now.astimezone(UTC)
        if self._db.dialect == "postgresql":
            value = conn.execute(select(func.clock_timestamp())).scalar_one()
            assert isinstance(value, datetime)
            return value.astimezone(UTC)
        return datetime.now(UTC)

    def now(self) -> datetime:
        """The store's notion of now (the clock lease expiry is judged by)."""
        with self._db.read("reading the clock") as conn:
            return self._now(conn)

    def _upsert(self) -> Any:
        """The dialect's INSERT with ON CONFLICT (imported lazily: only one backend is in use)."""
        if self._db.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert

    # -- checkpoints ------------------------------------------------------------------------

    def get_checkpoint(self, name: str) -> Checkpoint | None:
        with self._db.read(f"reading the checkpoint of {name}") as conn:
            return self._checkpoint(conn, name)

    def list_checkpoints(self) -> list[Checkpoint]:
        with self._db.read("listing checkpoints") as conn:
            rows = conn.execute(select(*_CHECKPOINT_COLUMNS).order_by(CheckpointRow.name)).all()
        return [_to_checkpoint(row) for row in rows]

    def advance_checkpoint(
        self, new: Checkpoint, *, expected_version: int | None, lease: Lease | None = None, rewind: bool = False
    ) -> Checkpoint:
        """Compare-and-swap the checkpoint of ``new.name`` from ``expected_version`` to ``new``.

        ``expected_version=None``: the checkpoint must not exist yet (first bootstrap).
        Raises :class:`CheckpointConflict` when the stored version is not the expected one,
        :class:`LeaseHeld` when ``lease`` is given and no longer held, and ``ValueError`` when
        the version would move backwards without a new ``table_id`` — unless ``rewind``: the
        caller moves it back on purpose (a backfill replays from an older version, a bootstrap
        replaced the target with an older snapshot), still compare-and-swapped.
        Returns the stored checkpoint (with ``updated_at`` set).
        """
        if lease is not None and lease.name != new.name:
            raise ValueError(f"lease is for '{lease.name}', checkpoint for '{new.name}'")
        with self._db.write(f"advancing the checkpoint of {new.name}") as conn:
            now = self._now(conn)
            if lease is not None:
                self._require_lease(conn, lease, now)
            values = {
                "version": new.version,
                "version_timestamp": new.version_timestamp,
                "table_id": new.table_id,
                "schema_fingerprint": new.schema_fingerprint,
                "target": new.target,
                "mode": new.mode,
                "updated_at": now,
            }
            if expected_version is None:
                stmt = (
                    self._upsert()(CheckpointRow)
                    .values(name=new.name, **values)
                    .on_conflict_do_nothing(index_elements=[CheckpointRow.name])
                    # RETURNING, not rowcount: psycopg reports -1 for INSERTs through SQLAlchemy 2.1.
                    .returning(CheckpointRow.name)
                )
                won = conn.execute(stmt).first() is not None
            else:
                cas = (
                    update(CheckpointRow)
                    .where(CheckpointRow.name == new.name, CheckpointRow.version == expected_version)
                    .values(**values)
                )
                if new.version < expected_version and not rewind:
                    cas = cas.where(CheckpointRow.table_id != new.table_id)
                won = conn.execute(cas).rowcount == 1
            if not won:
                self._explain_lost_cas(conn, new, expected_version)
            stored = self._checkpoint(conn, new.name)
        assert stored is not None
        return stored

    def _explain_lost_cas(self, conn: Connection, new: Checkpoint, expected: int | None) -> None:
        current = self._checkpoint(conn, new.name)
        if current is None and expected is None:
            # Lost the insert to a writer whose row was then reset before this read (PostgreSQL
            # reads the latest committed state per statement): still somebody else's turn.
            raise CheckpointConflict(f"checkpoint of {new.name} changed concurrently; plan again")
        if expected is None:
            assert current is not None
            raise CheckpointConflict(
                f"checkpoint of {new.name} already exists at version {current.version} (expected none): another "
                "sync bootstrapped it first; plan again from the stored checkpoint"
            )
        if current is None:
            raise CheckpointConflict(
                f"checkpoint of {new.name} no longer exists (expected version {expected}): it was reset; "
                "plan again (the table will be bootstrapped)"
            )
        if current.version != expected:
            raise CheckpointConflict(
                f"checkpoint of {new.name} is at version {current.version}, not the expected {expected}: another "
                "sync advanced it first; plan again from the stored checkpoint"
            )
        raise ValueError(
            f"checkpoint of {new.name} would move backwards from {expected} to {new.version} with the same "
            f"table id '{new.table_id}'; versions only go back when the provider re-created the table"
        )

    def reset_checkpoint(self, name: str) -> Checkpoint | None:
        """Forget ``name``'s checkpoint (the next sync bootstraps); return what was removed."""
        with self._db.write(f"resetting the checkpoint of {name}") as conn:
            current = self._checkpoint(conn, name)
            if current is not None:
                conn.execute(delete(CheckpointRow).where(CheckpointRow.name == name))
        return current

    @staticmethod
    def _checkpoint(conn: Connection, name: str) -> Checkpoint | None:
        row = conn.execute(select(*_CHECKPOINT_COLUMNS).where(CheckpointRow.name == name)).first()
        return None if row is None else _to_checkpoint(row)

    # -- run history ------------------------------------------------------------------------

    def start_run(self, name: str, *, start_version: int | None = None, end_version: int | None = None) -> int:
        """Record that a run of ``name`` starts now; return its id.

        Call it while holding ``name``'s lease: any run of ``name`` still marked running is
        then known to be dead and is marked failed as abandoned.
        """
        with self._db.write(f"starting a run of {name}") as conn:
            now = self._now(conn)
            conn.execute(
                update(RunRow)
                .where(RunRow.table_name == name, RunRow.status == RunStatus.RUNNING.value)
                .values(status=RunStatus.FAILED.value, finished_at=now, error=ABANDONED)
            )
            run_id = conn.execute(
                insert(RunRow)
                .values(
                    table_name=name,
                    start_version=start_version,
                    end_version=end_version,
                    status=RunStatus.RUNNING.value,
                    started_at=now,
                )
                .returning(RunRow.id)
            ).scalar_one()
        return run_id

    def finish_run(
        self,
        run_id: int,
        status: RunStatus,
        stats: RunStats | None = None,
        error: str | None = None,
        *,
        end_version: int | None = None,
        note: str | None = None,
    ) -> RunRecord:
        """Close a running run as succeeded or failed, with its counters and (redacted) error.

        ``end_version`` overrides the one given at start (a run may stop early). ``note``: a
        warning worth keeping on a run that succeeded (redacted and bounded like errors).
        Raises :class:`StateError` if the run does not exist or is no longer running.
        """
        if status is RunStatus.RUNNING:
            raise ValueError("finish_run needs a final status: succeeded or failed")
        stats = stats or RunStats()
        values: dict[str, Any] = {
            "status": status.value,
            "rows_inserted": stats.rows_inserted,
            "rows_updated": stats.rows_updated,
            "rows_deleted": stats.rows_deleted,
            "files_downloaded": stats.files_downloaded,
            "bytes_downloaded": stats.bytes_downloaded,
            "url_refreshes": stats.url_refreshes,
            "error": _clean_error(error),
            "note": _clean_error(note),
        }
        if end_version is not None:
            values["end_version"] = end_version
        with self._db.write(f"finishing run {run_id}") as conn:
            values["finished_at"] = self._now(conn)
            done = conn.execute(
                update(RunRow).where(RunRow.id == run_id, RunRow.status == RunStatus.RUNNING.value).values(**values)
            ).rowcount
            record = self._run(conn, run_id)
        if record is None:
            raise StateError(f"no run with id {run_id} in state store {self.url}")
        if done != 1:
            raise StateError(
                f"run {run_id} of {record.table} was already finished as {record.status.value}"
                + (f" ({record.error[:200]})" if record.error else "")
            )
        return record

    def get_run(self, run_id: int) -> RunRecord | None:
        with self._db.read(f"reading run {run_id}") as conn:
            return self._run(conn, run_id)

    def runs_for(self, name: str, limit: int = 20) -> list[RunRecord]:
        """The latest ``limit`` runs of ``name``, newest first."""
        with self._db.read(f"reading the runs of {name}") as conn:
            rows = conn.execute(
                select(*_RUN_COLUMNS).where(RunRow.table_name == name).order_by(RunRow.id.desc()).limit(limit)
            ).all()
        return [_to_run(row) for row in rows]

    def latest_runs(self, names: Iterable[str] | None = None) -> dict[str, RunRecord]:
        """The newest run of each table (of ``names``, or of every table ever run)."""
        latest = select(func.max(RunRow.id)).group_by(RunRow.table_name)
        if names is not None:
            wanted = list(names)
            if not wanted:
                return {}
            latest = latest.where(RunRow.table_name.in_(wanted))
        with self._db.read("reading the latest runs") as conn:
            rows = conn.execute(select(*_RUN_COLUMNS).where(RunRow.id.in_(latest.scalar_subquery()))).all()
        return {record.table: record for record in map(_to_run, rows)}

    @staticmethod
    def _run(conn: Connection, run_id: int) -> RunRecord | None:
        row = conn.execute(select(*_RUN_COLUMNS).where(RunRow.id == run_id)).first()
        return None if row is None else _to_run(row)

    # -- leases -----------------------------------------------------------------------------

    def acquire_lease(self, name: str, owner: str, ttl: timedelta) -> Lease:
        """Take the sync lease of ``name`` for ``ttl``, or raise :class:`LeaseHeld`.

        Succeeds when nobody holds it, the holder's lease expired, or ``owner`` already holds
        it (a restarted process with a stable owner name need not wait for expiry). Each
        success gets a new token, invalidating older handles of the same lease.
        """
        _check_ttl(ttl)
        token = uuid.uuid4().hex
        with self._db.write(f"acquiring the lease of {name}") as conn:
            now = self._now(conn)
            upsert = self._upsert()(LeaseRow).values(
                name=name, owner=owner, token=token, acquired_at=now, renewed_at=now, expires_at=now + ttl
            )
            upsert = upsert.on_conflict_do_update(
                index_elements=[LeaseRow.name],
                set_={
                    "owner": upsert.excluded.owner,
                    "token": upsert.excluded.token,
                    "acquired_at": upsert.excluded.acquired_at,
                    "renewed_at": upsert.excluded.renewed_at,
                    "expires_at": upsert.excluded.expires_at,
                },
                where=or_(LeaseRow.expires_at <= now, LeaseRow.owner == owner),
            )
            # RETURNING, not rowcount: psycopg reports -1 for INSERTs through SQLAlchemy 2.1.
            row = conn.execute(upsert.returning(*_LEASE_COLUMNS)).first()
            if row is not None:
                return _to_lease(row)  # committed as the block exits
            current = self._lease(conn, name)
        raise _held(name, current, now)

    def renew_lease(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        """Extend a held lease by ``ttl`` (default: its current ttl) from now.

        Raises :class:`LeaseHeld` if the lease was lost (taken over after expiry, or released).
        """
        ttl = ttl if ttl is not None else lease.ttl
        _check_ttl(ttl)
        with self._db.write(f"renewing the lease of {lease.name}") as conn:
            now = self._now(conn)
            renewed = conn.execute(
                update(LeaseRow)
                .where(LeaseRow.name == lease.name, LeaseRow.token == lease.token)
                .values(renewed_at=now, expires_at=now + ttl)
            ).rowcount
            current = self._lease(conn, lease.name)
        if renewed == 1 and current is not None:
            return current
        raise _lost(lease, current)

    def release_lease(self, lease: Lease) -> bool:
        """Give the lease up; False if it was no longer ours (already lost or released)."""
        with self._db.write(f"releasing the lease of {lease.name}") as conn:
            gone = conn.execute(
                delete(LeaseRow).where(LeaseRow.name == lease.name, LeaseRow.token == lease.token)
            ).rowcount
        return gone == 1

    def get_lease(self, name: str) -> Lease | None:
        """The lease row of ``name`` as stored (possibly expired: compare with :meth:`now`)."""
        with self._db.read(f"reading the lease of {name}") as conn:
            return self._lease(conn, name)

    def hold_lease(
        self,
        name: str,
        *,
        owner: str | None = None,
        ttl: timedelta = timedelta(seconds=60),
        renew_every: timedelta | None = None,
    ) -> AbstractContextManager[LeaseKeeper]:
        """Acquire ``name``'s lease, renew it from a heartbeat thread, release it on exit.

        ``with store.hold_lease(name) as keeper: … keeper.check() …`` — ``check()`` raises
        :class:`LeaseHeld` once renewal failed for good; pass ``keeper.lease`` to
        :meth:`advance_checkpoint` so a lost lease cannot advance the checkpoint.
        """
        return hold_lease(self, name, owner=owner or default_owner(), ttl=ttl, renew_every=renew_every)

    def _require_lease(self, conn: Connection, lease: Lease, now: datetime) -> None:
        # FOR UPDATE: a concurrent takeover waits until this transaction ends (PostgreSQL);
        # SQLite's BEGIN IMMEDIATE already excludes every other writer.
        row = conn.execute(select(*_LEASE_COLUMNS).where(LeaseRow.name == lease.name).with_for_update()).first()
        current = None if row is None else _to_lease(row)
        if current is None or current.token != lease.token:
            raise _lost(lease, current)
        if current.expired(now):
            raise LeaseHeld(
                f"lease of {lease.name} held by {lease.owner} expired at {_iso(current.expires_at)}; "
                "another process may take over, so this one must not advance the checkpoint"
            )

    @staticmethod
    def _lease(conn: Connection, name: str) -> Lease | None:
        row = conn.execute(select(*_LEASE_COLUMNS).where(LeaseRow.name == name)).first()
        return None if row is None else _to_lease(row)

    # -- maintenance ------------------------------------------------------------------------

    def ping(self) -> None:
        """Round-trip to the database (health checks); raises StateStoreUnavailable."""
        with self._db.read("pinging") as conn:
            conn.execute(text("SELECT 1"))


def _check_ttl(ttl: timedelta) -> None:
    if ttl <= timedelta(0):
        raise ValueError(f"lease ttl must be positive, got {ttl}")


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _held(name: str, current: Lease | None, now: datetime) -> LeaseHeld:
    if current is None:
        # Released between our upsert and our read: rare; the caller retries like any LeaseHeld.
        return LeaseHeld(f"lease of {name} changed hands while acquiring it; try again")
    left = max((current.expires_at - now).total_seconds(), 0.0)
    return LeaseHeld(
        f"{name} is being synced by {current.owner} (lease expires {_iso(current.expires_at)}, in {left:.0f} s); "
        "wait for that sync to finish, or for the lease to expire if that process died"
    )


def _lost(lease: Lease, current: Lease | None) -> LeaseHeld:
    if current is None:
        return LeaseHeld(f"lease of {lease.name} held by {lease.owner} was lost: it was released or taken over")
    return LeaseHeld(
        f"lease of {lease.name} held by {lease.owner} was lost: {current.owner} took it over "
        f"(expires {_iso(current.expires_at)})"
    )


def _clean_error(error: str | None) -> str | None:
    if error is None:
        return None
    cleaned = redact(error)
    if len(cleaned) > MAX_ERROR_CHARS:
        cleaned = cleaned[: MAX_ERROR_CHARS - 20] + " … [truncated]"
    return cleaned


def _to_checkpoint(row: AnyRow) -> Checkpoint:
    return Checkpoint(
        name=row.name,
        version=row.version,
        table_id=row.table_id,
        schema_fingerprint=row.schema_fingerprint,
        target=row.target,
        mode=row.mode,
        version_timestamp=row.version_timestamp,
        updated_at=row.updated_at,
    )


def _to_run(row: AnyRow) -> RunRecord:
    return RunRecord(
        id=row.id,
        table=row.table_name,
        status=RunStatus(row.status),
        start_version=row.start_version,
        end_version=row.end_version,
        started_at=row.started_at,
        finished_at=row.finished_at,
        stats=RunStats(
            rows_inserted=row.rows_inserted,
            rows_updated=row.rows_updated,
            rows_deleted=row.rows_deleted,
            files_downloaded=row.files_downloaded,
            bytes_downloaded=row.bytes_downloaded,
            url_refreshes=row.url_refreshes,
        ),
        error=row.error,
        note=row.note,
    )


def _to_lease(row: AnyRow) -> Lease:
    return Lease(
        name=row.name,
        owner=row.owner,
        token=row.token,
        acquired_at=row.acquired_at,
        renewed_at=row.renewed_at,
        expires_at=row.expires_at,
    )


__all__ = ["Clock", "StateStore", "open_store"]
