"""What every part of the state store shares: the database, and one clock to judge time by.

Every "now" comes from one clock per store: the database server's clock on PostgreSQL
(processes on different machines must not disagree about lease expiry), the local clock on
SQLite (the file is local, so the same clock), or an injected ``clock`` (tests). It is read
once per transaction and passed into SQL; the comparisons happen in the database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, func, select, text

from sharesync.state.database import Database

Clock = Callable[[], datetime]
AnyRow = Row[*tuple[Any, ...]]


class StoreBase:
    """The database and the clock; the checkpoint, run and lease parts of the store build on it."""

    def __init__(self, db: Database, *, clock: Clock | None = None, run_retention: timedelta | None = None) -> None:
        self._db = db
        self._clock = clock
        self._run_retention = run_retention  # None: run history is kept forever

    @property
    def url(self) -> str:
        """The store's URL with the password masked (safe to print)."""
        return self._db.display_url

    def __repr__(self) -> str:
        return f"StateStore({self.url!r})"

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

    def ping(self) -> None:
        """Round-trip to the database (health checks); raises StateStoreUnavailable."""
        with self._db.read("pinging") as conn:
            conn.execute(text("SELECT 1"))

    def _upsert(self) -> Any:
        """The dialect's INSERT with ON CONFLICT (imported lazily: only one backend is in use)."""
        if self._db.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert


def iso(value: datetime) -> str:
    """A timestamp as messages show it: UTC, seconds, ``Z``."""
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
