"""The state store as the protocol client's log of asynchronous query submissions.

The client (:mod:`sharesync.sync.protocol.asyncquery`) and the store live side by side in the
layering and know nothing of each other; this adapter, in the run layer above both, translates
the client's :class:`Submission` to the store's :class:`PendingQuery` and back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharesync.state import PendingQuery
from sharesync.sync.core.config import SharesyncConfig
from sharesync.sync.core.providers import DEFAULT_PROVIDER, table_key
from sharesync.sync.protocol.asyncquery import Submission, SubmissionLog

if TYPE_CHECKING:
    from sharesync.state import StateStore


class StoreSubmissions:
    """A :class:`SubmissionLog` kept in the state store's ``sharesync_pending_queries``, under the
    table's key (the client knows the shared name only; the provider makes it one table of many)."""

    def __init__(self, store: StateStore, provider: str = DEFAULT_PROVIDER) -> None:
        self._store = store
        self._provider = provider

    def load(self, table: str, request_key: str) -> Submission | None:
        found = self._store.pending_query(table_key(self._provider, table), request_key)
        if found is None:
            return None
        return Submission(
            table,
            found.request_key,
            found.idempotency_key,
            found.query_id,
            found.start_version,
            found.end_version,
        )

    def save(self, submission: Submission) -> None:
        self._store.record_pending_query(
            PendingQuery(
                table_key(self._provider, submission.table),
                submission.request_key,
                submission.idempotency_key,
                submission.query_id,
                submission.start_version,
                submission.end_version,
            )
        )

    def clear(self, table: str, request_key: str) -> None:
        self._store.clear_pending_query(table_key(self._provider, table), request_key)


def submissions_for(
    config: SharesyncConfig, store: StateStore, provider: str = DEFAULT_PROVIDER
) -> SubmissionLog | None:
    """Where snapshot queries keep their submissions; None (synchronous queries) with ``async_queries: never``."""
    return None if config.async_queries == "never" else StoreSubmissions(store, provider)
