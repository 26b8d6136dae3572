"""Connections to the state database: URL checks, one pooled database per URL, and error translation.

This is the one place where SQLAlchemy/driver exceptions become :mod:`sharesync.sync.core.errors` classes,
and the one place that knows the two backends' quirks:

* **SQLite** runs in WAL mode (readers never block the writer) with a busy timeout, and every
  write transaction starts with ``BEGIN IMMEDIATE``. The last point is what keeps 20
  parallel Dagster runs from failing with "database is locked": a deferred transaction that
  reads and then writes cannot wait for the lock (SQLite returns SQLITE_BUSY at once to
  avoid deadlock), whereas ``BEGIN IMMEDIATE`` takes the write lock up front and queues on
  the busy handler. The Python driver's own BEGIN handling is switched off so ours is used.
  ``synchronous=FULL`` is kept: a checkpoint lost on power failure would re-apply versions.
  A new connection's first statements are retried while SQLite answers "locked" without
  waiting (:func:`_open_wal`).
* **PostgreSQL** goes through psycopg 3 (``postgresql://`` and ``postgres://`` are mapped to
  ``postgresql+psycopg://``, because SQLAlchemy's default driver psycopg2 is not installed).
  The pool checks each connection before use (``pool_pre_ping``), so a process that outlives
  a database restart (``sync --every``, the Dagster sensor) reconnects by itself.

Passwords: the URL shown anywhere is rendered with the password hidden, the password is
registered with :func:`sharesync.sync.core.redact.register_secret`, and SQLAlchemy's engines hide
bound parameters in their error messages.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, exc
from sqlalchemy.engine import URL, make_url

from sharesync.state.sqlite import SQLITE_BUSY_TIMEOUT_MS
from sharesync.sync.core.errors import ConfigError, SharesyncError, StateError, StateStoreUnavailable
from sharesync.sync.core.redact import redact, register_secret

PG_CONNECT_TIMEOUT_S = 10

_SUPPORTED = (
    "use 'sqlite:///path/to/state.db' or 'postgresql://user@host:5432/dbname' "
    "(password in the URL, PGPASSWORD or ~/.pgpass)"
)
_PG_DRIVERS = {"postgresql", "postgres", "postgresql+psycopg"}
_SQLITE_DRIVERS = {"sqlite", "sqlite+pysqlite"}

# Execution option that makes the SQLite begin hook emit BEGIN IMMEDIATE.
_WRITE = "sharesync_write"


@dataclass
class _Pooled:
    """What this process keeps per database URL, for as long as the process uses it."""

    engine: Engine
    write_lock: threading.Lock | None  # SQLite: this process's writers queue here first
    # table name → token of a lease this process holds no more but could not release (the
    # database was unreachable): its next acquire of that table may take it back at once.
    unreleased: dict[str, str] = field(default_factory=dict)


class Database:
    """A state database: its SQLAlchemy engine, its safe-to-print URL, and transaction helpers."""

    def __init__(self, pooled: _Pooled, url: URL, display_url: str) -> None:
        self.engine = pooled.engine
        self.url = url
        self.display_url = display_url
        self._write_lock = pooled.write_lock
        self.unreleased_leases = pooled.unreleased

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def read(self, action: str) -> Iterator[Connection]:
        """A read-only transaction; never takes SQLite's write lock."""
        with self.translate(action), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def write(self, action: str) -> Iterator[Connection]:
        """A write transaction: ``BEGIN IMMEDIATE`` on SQLite, so concurrent writers queue."""
        with self.translate(action), self._in_process_turn(action), self.engine.connect() as conn:
            conn.execution_options(**{_WRITE: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _in_process_turn(self, action: str) -> Iterator[None]:
        # SQLite has one writer at a time, and its busy handler polls with growing sleeps (up
        # to 100 ms), so a waiting writer keeps losing to newly arriving ones. Threads of one
        # process (workers, lease heartbeats) therefore queue on a lock first; only one
        # connection per process then waits on the file lock.
        if self._write_lock is None:
            yield
            return
        if not self._write_lock.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
            raise StateStoreUnavailable(
                f"state database '{self.url.database}' stayed busy in this process for "
                f"{SQLITE_BUSY_TIMEOUT_MS // 1000} s while {action}"
            )
        try:
            yield
        finally:
            self._write_lock.release()

    @contextmanager
    def translate(self, action: str) -> Iterator[None]:
        """Turn driver exceptions raised while ``action`` runs into :class:`StateError` s."""
        started = time.monotonic()
        try:
            yield
        except SharesyncError:
            raise
        except (exc.OperationalError, exc.InterfaceError) as error:
            waited = time.monotonic() - started
            raise StateStoreUnavailable(self._unavailable_message(action, error, waited)) from error
        except exc.DBAPIError as error:
            raise StateError(f"state store {self.display_url}: {action} failed: {_driver_reason(error)}") from error
        except exc.SQLAlchemyError as error:
            raise StateError(f"state store {self.display_url}: {action} failed: {error}") from error

    def _unavailable_message(self, action: str, error: exc.DBAPIError, waited: float) -> str:
        reason = _driver_reason(error)
        if self.dialect == "sqlite":
            path = self.url.database or ""
            lowered = reason.lower()
            if "readonly" in lowered or "read-only" in lowered:
                return (
                    f"state database '{path}' is read-only ({reason}); make the file and its directory "
                    "writable, or point state_store / SHARESYNC_STATE_STORE elsewhere"
                )
            if "locked" in lowered or "busy" in lowered:
                # The time actually waited, not the timeout: SQLite answers some lock conflicts
                # (WAL recovery, a closing connection's cleanup) without waiting on its handler.
                return (
                    f"state database '{path}' was locked while {action} (gave up after {waited:.1f} s; "
                    f"the busy timeout is {SQLITE_BUSY_TIMEOUT_MS / 1000:g} s); another process holds a long "
                    "write transaction. For many parallel writers use PostgreSQL"
                )
            return f"cannot open state database '{path}' while {action}: {reason}"
        host = self.url.host or "localhost (unix socket)"
        port = self.url.port or 5432
        return f"cannot use state store at host {host} port {port} ({self.display_url}) while {action}: {reason}"


def _driver_reason(error: exc.DBAPIError) -> str:
    """The driver's own message, first line only (psycopg appends multi-line hints)."""
    text = str(error.orig) if error.orig is not None else str(error)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return redact(lines[0] if lines else type(error.orig).__name__)


def parse_url(raw: str) -> URL:
    """Validate a state-store URL and pin the driver; bad input is a :class:`ConfigError`."""
    try:
        url = make_url(raw)
    except exc.ArgumentError:
        raise ConfigError(f"state_store: '{redact(raw)}' is not a database URL; {_SUPPORTED}") from None
    if url.password:
        register_secret(str(url.password))
    driver = url.drivername
    if driver in _PG_DRIVERS:
        return url.set(drivername="postgresql+psycopg")
    if driver in _SQLITE_DRIVERS:
        database = url.database or ""
        if database in ("", ":memory:") or database.startswith("file::memory:"):
            raise ConfigError(
                f"state_store: '{raw}' is an in-memory SQLite database, which forgets every checkpoint when the "
                "process ends; use a file path such as 'sqlite:///.sharesync/state.db'"
            )
        return url.set(drivername="sqlite")
    raise ConfigError(
        f"state_store: unsupported database '{driver}' in '{display(url)}'; {_SUPPORTED} "
        "(SHARESYNC_STATE_STORE overrides the config)"
    )


def display(url: URL) -> str:
    """The URL as it may appear in messages and logs: password masked."""
    return url.render_as_string(hide_password=True)


def sqlite_path(url: URL) -> Path | None:
    return Path(url.database) if url.get_backend_name() == "sqlite" and url.database else None


def prepare_sqlite_file(url: URL) -> None:
    """Create the database's directory and fail early, with the fix, if it cannot be written."""
    path = sqlite_path(url)
    if path is None:
        return
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StateStoreUnavailable(
            f"cannot create directory '{parent}' for the state database: {error.strerror}; "
            "choose a writable location with state_store / SHARESYNC_STATE_STORE"
        ) from None
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StateStoreUnavailable(
            f"state database '{path}' is read-only; make it writable, or point state_store / "
            "SHARESYNC_STATE_STORE elsewhere"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise StateStoreUnavailable(
            f"directory '{parent}' of the state database is read-only (SQLite writes its WAL files next to "
            "the database); make it writable, or point state_store / SHARESYNC_STATE_STORE elsewhere"
        )


_databases: dict[tuple[int, str], _Pooled] = {}
_databases_lock = threading.Lock()


def database_for(url: URL) -> Database:
    """The process-wide :class:`Database` for ``url`` (one per URL: SQLAlchemy's engine pools its connections).

    Process-wide on purpose: every store of one process on one SQLite file must queue its writers
    on the same in-process lock (two stores each with its own would meet as SQLITE_BUSY), and a
    ``sync --every`` process or a Dagster code location keeps its connections across passes and
    runs. Keyed by pid too: a forked child must never reuse its parent's pooled connections.
    """
    key = (os.getpid(), url.render_as_string(hide_password=False))
    with _databases_lock:
        pooled = _databases.get(key)
        if pooled is None:
            created = _create_engine(url)
            pooled = _Pooled(created, threading.Lock() if created.dialect.name == "sqlite" else None)
            _databases[key] = pooled
    return Database(pooled, url, display(url))


def dispose_databases() -> None:
    """Close every pooled connection of this process (tests, and before a server restart)."""
    with _databases_lock:
        mine = [key for key in _databases if key[0] == os.getpid()]
        for key in mine:
            _databases.pop(key).engine.dispose()


def _create_engine(url: URL) -> Engine:
    try:
        if url.get_backend_name() == "sqlite":
            return _sqlite_engine(url)
        connect_args: dict[str, Any] = {}
        if "connect_timeout" not in url.query:
            connect_args["connect_timeout"] = PG_CONNECT_TIMEOUT_S
        if "application_name" not in url.query:
            connect_args["application_name"] = "sharesync"
        return create_engine(url, connect_args=connect_args, pool_pre_ping=True, hide_parameters=True)
    except (exc.ArgumentError, exc.NoSuchModuleError, ImportError) as error:
        raise ConfigError(f"state_store: cannot use '{display(url)}': {error}; {_SUPPORTED}") from None


def _sqlite_engine(url: URL) -> Engine:
    engine = create_engine(
        url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
        hide_parameters=True,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take BEGIN away from the sqlite3 module (it would start DEFERRED transactions lazily).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            _open_wal(cursor)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE) else "BEGIN")

    return engine


def _open_wal(cursor: Any) -> None:
    """A new connection's first statements, retried while SQLite answers "locked" at once.

    A connection's first query is where SQLite returns SQLITE_BUSY *without* calling the busy
    handler (sqlite.org/wal.html, "Sometimes queries return SQLITE_BUSY in WAL mode"): while
    the last other connection, closing, cleans up the WAL and shared-memory files, and while
    another connection runs WAL recovery. Many ``sharesync`` processes opening and closing one
    fresh store meet these windows (the read-only checkpoint look of :mod:`sharesync.state.sqlite`
    opens and closes a connection too); the busy timeout bounds the retries. Once open, the
    connection holds the database's shared lock, so later queries wait on the handler as usual.
    """
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    pause = 0.001
    while True:
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = FULL")
            return
        except sqlite3.OperationalError as error:
            reason = str(error).lower()
            if ("locked" not in reason and "busy" not in reason) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)  # a back-off between attempts, as the busy handler's own
        pause = min(pause * 2, 0.1)
