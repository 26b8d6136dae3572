"""Typed SQLAlchemy tables of the state store (the shape the Alembic head must produce).

Every table name carries a ``sharesync_`` prefix and Alembic's version row lives in
``sharesync_alembic_version`` (:data:`sharesync.state.revisions.VERSION_TABLE`): a PostgreSQL state
store is often a schema in a database that other applications (with their own
``alembic_version``) share, and neither side may mistake the other's tables or revisions for
its own. ``tests/state/test_migrations.py`` checks that
these models and the migration scripts agree.

Only the store (:mod:`sharesync.state.store` and the modules it is built from) uses these
classes; they never leave the package (the store returns :mod:`sharesync.state.records` values).
:mod:`sharesync.state.sqlite` reads ``sharesync_checkpoints`` of a SQLite store with plain SQL,
without SQLAlchemy; ``tests/state/test_sqlite_reader.py`` keeps the two reads equal.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import BigInteger, CheckConstraint, DateTime, Dialect, Index, Integer, String, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from sharesync.state.records import stored_utc

NAME_LENGTH = 512


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC in, aware UTC out, on every backend.

    PostgreSQL stores ``timestamptz`` natively. SQLite has no time zone type: values are
    stored as naive UTC text in SQLAlchemy's fixed-width format, so string order equals time
    order and ``expires_at <= :now`` comparisons inside SQL stay correct.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} given to the state store; use aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return None if value is None else stored_utc(value)


# SQLite only auto-increments an INTEGER PRIMARY KEY (the rowid alias), not BIGINT.
RunId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


class CheckpointRow(Base):
    __tablename__ = "sharesync_checkpoints"

    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger)
    version_timestamp: Mapped[datetime | None] = mapped_column(UTCDateTime)
    table_id: Mapped[str] = mapped_column(String(NAME_LENGTH))
    schema_fingerprint: Mapped[str] = mapped_column(String(NAME_LENGTH))
    target: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(32))
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # revision 0004: the target state the checkpoint was written for (NULL on older rows).
    target_table_id: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    target_version: Mapped[int | None] = mapped_column(BigInteger)
    target_mode: Mapped[str | None] = mapped_column(String(32))

    __table_args__ = (CheckConstraint("version >= 0", name="ck_sharesync_checkpoints_version"),)


class RunRow(Base):
    __tablename__ = "sharesync_runs"

    id: Mapped[int] = mapped_column(RunId, primary_key=True, autoincrement=True)
    table_name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    start_version: Mapped[int | None] = mapped_column(BigInteger)
    end_version: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))
    rows_inserted: Mapped[int] = mapped_column(BigInteger, server_default="0")
    rows_updated: Mapped[int] = mapped_column(BigInteger, server_default="0")
    rows_deleted: Mapped[int] = mapped_column(BigInteger, server_default="0")
    files_downloaded: Mapped[int] = mapped_column(BigInteger, server_default="0")
    bytes_downloaded: Mapped[int] = mapped_column(BigInteger, server_default="0")
    url_refreshes: Mapped[int] = mapped_column(BigInteger, server_default="0")  # revision 0002
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(Text)  # revision 0002
    note: Mapped[str | None] = mapped_column(Text)  # revision 0003: warning of a succeeded run

    __table_args__ = (
        CheckConstraint("status IN ('running', 'succeeded', 'failed')", name="ck_sharesync_runs_status"),
        # revision 0002: "latest run per table" and "runs of one table, newest first" read this index only.
        Index("ix_sharesync_runs_table_id", "table_name", "id"),
    )


class LeaseRow(Base):
    __tablename__ = "sharesync_leases"

    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    owner: Mapped[str] = mapped_column(String(NAME_LENGTH))
    token: Mapped[str] = mapped_column(String(64))
    acquired_at: Mapped[datetime] = mapped_column(UTCDateTime)
    renewed_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # revision 0004: the holder process (NULL on older rows: those only expire by their ttl).
    holder_host: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    holder_pid: Mapped[int | None] = mapped_column(BigInteger)
    holder_started: Mapped[int | None] = mapped_column(BigInteger)
    holder_namespace: Mapped[str | None] = mapped_column(String(NAME_LENGTH))


class PendingQueryRow(Base):
    """revision 0005: an asynchronous query submitted to the provider and not yet read to the end."""

    __tablename__ = "sharesync_pending_queries"

    table_name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    request_key: Mapped[str] = mapped_column(String(64), primary_key=True)  # digest of the request
    start_version: Mapped[int | None] = mapped_column(BigInteger)
    end_version: Mapped[int | None] = mapped_column(BigInteger)
    idempotency_key: Mapped[str] = mapped_column(String(64))
    query_id: Mapped[str | None] = mapped_column(Text)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime)
