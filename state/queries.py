"""Asynchronous query submissions: recorded before polling, cleared once the answer is read.

A row per (table, request): :meth:`record_pending_query` writes the idempotency key before the
submission and the ``queryId`` after it (an upsert, so the second call only adds the id);
:meth:`clear_pending_query` deletes it once the answer was read, or when the provider failed or
forgot the query (the next submission then gets a new key). Nothing here is a secret: keys and
query ids are opaque identifiers, never credentials.
"""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy import delete, select

from sharesync.state.models import PendingQueryRow
from sharesync.state.records import PendingQuery
from sharesync.state.store_base import StoreBase

_COLUMNS = (
    PendingQueryRow.table_name,
    PendingQueryRow.request_key,
    PendingQueryRow.idempotency_key,
    PendingQueryRow.query_id,
    PendingQueryRow.start_version,
    PendingQueryRow.end_version,
    PendingQueryRow.submitted_at,
)


class PendingQueries(StoreBase):
    """The pending-query part of :class:`sharesync.state.store.StateStore`."""

    def pending_query(self, table: str, request_key: str) -> PendingQuery | None:
        with self._db.read(f"reading the pending query of {table}") as conn:
            row = conn.execute(
                select(*_COLUMNS).where(PendingQueryRow.table_name == table, PendingQueryRow.request_key == request_key)
            ).first()
            if row is None:
                return None
            return PendingQuery(
                table=row.table_name,
                request_key=row.request_key,
                idempotency_key=row.idempotency_key,
                query_id=row.query_id,
                start_version=row.start_version,
                end_version=row.end_version,
                submitted_at=row.submitted_at,
            )

    def record_pending_query(self, query: PendingQuery) -> PendingQuery:
        """Insert or replace the row of ``query.table`` / ``query.request_key``; returns it as stored."""
        with self._db.write(f"recording the pending query of {query.table}") as conn:
            now = self._now(conn)
            values = {
                "idempotency_key": query.idempotency_key,
                "query_id": query.query_id,
                "start_version": query.start_version,
                "end_version": query.end_version,
                "submitted_at": now,
            }
            stmt = self._upsert()(PendingQueryRow).values(
                table_name=query.table, request_key=query.request_key, **values
            )
            conn.execute(
                stmt.on_conflict_do_update(
                    index_elements=[PendingQueryRow.table_name, PendingQueryRow.request_key], set_=values
                )
            )
        return replace(query, submitted_at=now)

    def clear_pending_query(self, table: str, request_key: str) -> None:
        with self._db.write(f"clearing the pending query of {table}") as conn:
            conn.execute(
                delete(PendingQueryRow).where(
                    PendingQueryRow.table_name == table, PendingQueryRow.request_key == request_key
                )
            )
