"""The state store: per-table checkpoints, run history and leases, in SQLite or PostgreSQL.

It is what makes sync exactly-once and observable, so it promises little and keeps it:

``open_store(url)``
    validates the URL (:class:`ConfigError` for an unknown scheme), creates a SQLite file's
    directory, refuses a schema written by a newer sharesync (:class:`StateSchemaTooNew`,
    nothing written) and applies pending migrations (once, under a lock, however many
    processes open the store at the same moment).

Checkpoints (:mod:`sharesync.state.checkpoints`)
    compare-and-swap, never read-modify-write; lease-guarded advances are fenced by the
    lease's token in the same transaction.

Leases (:mod:`sharesync.state.lease_table`)
    at most one sync per table, decided by the database; a crashed holder's lease expires by
    its ttl, or is taken over at once by a contender on the same host that finds the holder
    process gone. :meth:`StateStore.hold_lease` renews from a heartbeat thread while work runs.

Run history (:mod:`sharesync.state.runs`)
    runs with counters and redacted error text; a run left ``running`` by a dead process is
    closed as abandoned by whoever next owns the table. Finished runs older than the retention
    are deleted as a table's runs are written, except its newest succeeded and failed run.

Pending queries (:mod:`sharesync.state.queries`)
    an asynchronous query's idempotency key and ``queryId``, kept until its answer is read,
    so a killed sync resumes polling the same query.

Time (:mod:`sharesync.state.store_base`)
    one clock per store, read once per transaction; comparisons happen in the database.

Failures
    Driver errors become :class:`StateStoreUnavailable` (connection, lock timeout, read-only
    file) or :class:`StateError`; messages show the URL with its password masked.
"""

from __future__ import annotations

from datetime import timedelta

from sharesync.state.checkpoints import Checkpoints
from sharesync.state.database import database_for, parse_url, prepare_sqlite_file
from sharesync.state.lease_table import Leases
from sharesync.state.migrate import ensure_schema
from sharesync.state.queries import PendingQueries
from sharesync.state.runs import RunHistory
from sharesync.state.store_base import Clock


def open_store(url: str, *, clock: Clock | None = None, run_retention: timedelta | None = None) -> StateStore:
    """Open (creating and migrating as needed) the state store at ``url``.

    Engines are shared per URL within a process, so opening is cheap after the first time.
    ``run_retention``: how long finished runs are kept (None: forever; see :mod:`sharesync.state.runs`).
    """
    parsed = parse_url(url)
    prepare_sqlite_file(parsed)
    db = database_for(parsed)
    ensure_schema(db)
    return StateStore(db, clock=clock, run_retention=run_retention)


class StateStore(Checkpoints, RunHistory, Leases, PendingQueries):
    """Checkpoints, run history, leases and pending asynchronous queries; see the module docstring for the guarantees."""


__all__ = ["Clock", "StateStore", "open_store"]
