"""Leases: at most one sync per table, across processes and machines.

Acquire is a single conditional upsert (``INSERT … ON CONFLICT DO UPDATE … WHERE the old
lease expired OR has the same owner``), so the database decides every race; losers get
:class:`LeaseHeld` naming the holder and the expiry. Renew and release match the
per-acquisition token.

A crashed holder stops renewing and its lease expires: no manual cleanup. On the holder's own
host nobody needs to wait that long: the lease records the holder process
(:mod:`sharesync.state.lease_holder`), and a contender that finds that process gone takes the lease
over at once — compare-and-swapped on the dead holder's token, so of several contenders one
wins — and closes the dead holder's running runs as abandoned in the same transaction. A
holder on another host (or where the host cannot tell) still expires by its ttl only. A lease
this process could not release because the database was unreachable is taken back at once by
this process's next acquire of the table (``sync --every`` after an outage).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from sqlalchemy import Connection, delete, or_, select, update

from sharesync.state.lease_heartbeat import LeaseKeeper
from sharesync.state.lease_holder import default_owner, is_alive_on_this_host, this_process
from sharesync.state.models import LeaseRow
from sharesync.state.records import Holder, Lease, Takeover
from sharesync.state.run_rows import abandon_running
from sharesync.state.store_base import AnyRow, StoreBase, iso
from sharesync.sync.core.errors import LeaseHeld, StateError

log = logging.getLogger("sharesync.state")

_LEASE_COLUMNS = (
    LeaseRow.name,
    LeaseRow.owner,
    LeaseRow.token,
    LeaseRow.acquired_at,
    LeaseRow.renewed_at,
    LeaseRow.expires_at,
    LeaseRow.holder_host,
    LeaseRow.holder_pid,
    LeaseRow.holder_started,
    LeaseRow.holder_namespace,
)


class Leases(StoreBase):
    """The lease part of :class:`sharesync.state.store.StateStore`."""

    def acquire_lease(self, name: str, owner: str, ttl: timedelta, *, holder: Holder | None = None) -> Lease:
        """Take the sync lease of ``name`` for ``ttl``, or raise :class:`LeaseHeld`.

        Succeeds when nobody holds it, the holder's lease expired, the holder's process is
        gone from this host, or ``owner`` already holds it (a restarted process with a stable
        owner name need not wait for expiry). Each success gets a new token, invalidating
        older handles of the same lease. ``holder`` defaults to the calling process.
        """
        return self.acquire_lease_with_takeover(name, owner, ttl, holder=holder)[0]

    def acquire_lease_with_takeover(
        self, name: str, owner: str, ttl: timedelta, *, holder: Holder | None = None
    ) -> tuple[Lease, Takeover | None]:
        """:meth:`acquire_lease`, also saying whether it was taken from a dead holder."""
        _check_ttl(ttl)
        holder = holder or this_process()
        values = {
            "owner": owner,
            "token": uuid.uuid4().hex,
            "holder_host": holder.host,
            "holder_pid": holder.pid,
            "holder_started": holder.started,
            "holder_namespace": holder.namespace,
        }
        # A lease this process could not release (the database was unreachable) is nobody's.
        unreleased = self._db.unreleased_leases.get(name)
        with self._db.write(f"acquiring the lease of {name}") as conn:
            now = self._now(conn)
            values |= {"acquired_at": now, "renewed_at": now, "expires_at": now + ttl}
            upsert = self._upsert()(LeaseRow).values(name=name, **values)
            upsert = upsert.on_conflict_do_update(
                index_elements=[LeaseRow.name],
                set_={key: upsert.excluded[key] for key in values},
                where=or_(LeaseRow.expires_at <= now, LeaseRow.owner == owner, LeaseRow.token == (unreleased or "")),
            )
            # RETURNING, not rowcount: psycopg reports -1 for INSERTs through SQLAlchemy 2.1.
            row = conn.execute(upsert.returning(*_LEASE_COLUMNS)).first()
            if row is not None:
                if unreleased is not None:
                    self._db.unreleased_leases.pop(name, None)
                return _to_lease(row), None  # committed as the block exits
            current = self._lease(conn, name)
            alive = None if current is None or current.holder is None else is_alive_on_this_host(current.holder)
            if current is not None and alive is False:
                taken = self._take_over(conn, current, values, now)
                if taken is not None:
                    return taken
                current, alive = self._lease(conn, name), None
        raise _held(name, current, now, alive=alive)

    @staticmethod
    def _take_over(
        conn: Connection, dead: Lease, values: dict[str, object], now: datetime
    ) -> tuple[Lease, Takeover] | None:
        assert dead.holder is not None
        # Swapped on the dead holder's token: of several contenders that saw it dead, one wins.
        row = conn.execute(
            update(LeaseRow)
            .where(LeaseRow.name == dead.name, LeaseRow.token == dead.token)
            .values(**values)
            .returning(*_LEASE_COLUMNS)
        ).first()
        if row is None:
            return None
        lease = _to_lease(row)
        reason = (
            f"abandoned: the process holding the lease ({dead.holder}, owner {dead.owner}) died without "
            f"finishing this run; {lease.owner} took the lease over"
        )
        runs = abandon_running(conn, dead.name, now, reason)
        takeover = Takeover(dead.name, dead.holder, dead.owner, dead.expires_at, runs)
        log.info("%s", takeover)
        return lease, takeover

    def renew_lease(self, lease: Lease, ttl: timedelta | None = None) -> Lease:
        """Extend a held lease by ``ttl`` (default: its current ttl) from now.

        Raises :class:`LeaseHeld` if the lease was lost (taken over, or released).
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

    @contextmanager
    def hold_lease(
        self,
        name: str,
        *,
        owner: str | None = None,
        ttl: timedelta = timedelta(seconds=60),
        renew_every: timedelta | None = None,
        holder: Holder | None = None,
    ) -> Iterator[LeaseKeeper]:
        """Acquire ``name``'s lease, renew it from a heartbeat thread, release it on exit.

        ``with store.hold_lease(name) as keeper: … keeper.check() …`` — ``check()`` raises
        :class:`LeaseHeld` once renewal failed for good; pass ``keeper.lease`` to
        :meth:`advance_checkpoint` so a lost lease cannot advance the checkpoint;
        ``keeper.takeover`` says whether the lease was taken from a dead process.
        """
        lease, takeover = self.acquire_lease_with_takeover(name, owner or default_owner(), ttl, holder=holder)
        keeper = LeaseKeeper(self, lease, renew_every or ttl / 3, takeover=takeover)
        keeper.start()
        try:
            yield keeper
        finally:
            keeper.stop()
            if not keeper.lost:
                try:
                    self.release_lease(keeper.lease)
                except StateError as error:
                    # Not fatal: the lease expires by itself at keeper.lease.expires_at, and this
                    # process's next acquire of the table takes it back at once.
                    self._db.unreleased_leases[name] = keeper.lease.token
                    log.warning("could not release the lease of %s (it will expire): %s", name, error)

    @staticmethod
    def _lease(conn: Connection, name: str) -> Lease | None:
        row = conn.execute(select(*_LEASE_COLUMNS).where(LeaseRow.name == name)).first()
        return None if row is None else _to_lease(row)


def require_lease(conn: Connection, lease: Lease, now: datetime) -> None:
    """Raise :class:`LeaseHeld` unless ``lease`` is still held, locking its row until commit."""
    # FOR UPDATE: a concurrent takeover waits until this transaction ends (PostgreSQL);
    # SQLite's BEGIN IMMEDIATE already excludes every other writer.
    row = conn.execute(select(*_LEASE_COLUMNS).where(LeaseRow.name == lease.name).with_for_update()).first()
    current = None if row is None else _to_lease(row)
    if current is None or current.token != lease.token:
        raise _lost(lease, current)
    if current.expired(now):
        raise LeaseHeld(
            f"lease of {lease.name} held by {lease.owner} expired at {iso(current.expires_at)}; "
            "another process may take over, so this one must not advance the checkpoint"
        )


def _check_ttl(ttl: timedelta) -> None:
    if ttl <= timedelta(0):
        raise ValueError(f"lease ttl must be positive, got {ttl}")


def _held(name: str, current: Lease | None, now: datetime, *, alive: bool | None) -> LeaseHeld:
    if current is None:
        # Released between our upsert and our read: rare; the caller retries like any LeaseHeld.
        return LeaseHeld(f"lease of {name} changed hands while acquiring it; try again")
    left = max((current.expires_at - now).total_seconds(), 0.0)
    advice = (
        f"wait for that sync to finish (its process {current.holder} runs on this host)"
        if alive
        else "wait for that sync to finish, or for the lease to expire if that process died"
    )
    return LeaseHeld(
        f"{name} is being synced by {current.owner} (lease expires {iso(current.expires_at)}, in {left:.0f} s); "
        + advice
    )


def _lost(lease: Lease, current: Lease | None) -> LeaseHeld:
    if current is None:
        return LeaseHeld(f"lease of {lease.name} held by {lease.owner} was lost: it was released or taken over")
    return LeaseHeld(
        f"lease of {lease.name} held by {lease.owner} was lost: {current.owner} took it over "
        f"(expires {iso(current.expires_at)})"
    )


def _to_lease(row: AnyRow) -> Lease:
    holder = None
    if row.holder_host is not None and row.holder_pid is not None:
        holder = Holder(row.holder_host, row.holder_pid, row.holder_started, row.holder_namespace)
    return Lease(
        name=row.name,
        owner=row.owner,
        token=row.token,
        acquired_at=row.acquired_at,
        renewed_at=row.renewed_at,
        expires_at=row.expires_at,
        holder=holder,
    )
