"""Asynchronous queries on the local server (spec "asyncQuery", "Get Query Info"), for tests and demos.

Off by default: the server then does not recognise ``asyncquery`` and answers every query
synchronously, as the spec allows. With ``after_polls`` set, a query submitted with
``asyncquery=true`` is answered with a ``queryStatus`` line and stays ``pending`` for that many
polls; the next poll returns its files (paged like any query). Submissions are deduplicated by
``(table, idempotencyKey)``, and counted, so a test can prove a resumed sync did not submit
again. ``outcome`` makes the query ``failed`` instead, or ``expire`` it (404, as for an unknown
``queryId``). All knobs are live: a test may change them while the server runs.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from sharesync.sync.server.problems import ApiError
from sharesync.sync.server.snapshots import QueryRequest

Outcome = Literal["succeed", "fail", "expire"]
OUTCOMES: tuple[Outcome, ...] = ("succeed", "fail", "expire")


@dataclass
class _Query:
    table: str
    request: QueryRequest
    polls: int = 0


@dataclass
class AsyncQueries:
    """The async-query knobs and the queries submitted so far (thread-safe)."""

    after_polls: int | None = None  # None: asyncquery is not recognised (synchronous answers)
    outcome: Outcome = "succeed"
    submissions: int = 0  # submissions that started a new query (a deduplicated retry does not count)
    polls: int = 0  # Get Query Info calls answered, of every query
    _queries: dict[str, _Query] = field(default_factory=dict, repr=False)
    _by_key: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def enabled(self, capabilities: dict[str, str]) -> bool:
        return self.after_polls is not None and capabilities.get("asyncquery") == "true"

    def submit(self, table: str, request: QueryRequest) -> str:
        """The queryId for ``request``: the one its idempotency key already maps to, or a new one."""
        key = request.idempotency_key
        with self._lock:
            if key is not None and (table, key) in self._by_key:
                return self._by_key[(table, key)]
            query_id = f"q-{uuid.uuid4().hex[:12]}"
            self._queries[query_id] = _Query(table, request.model_copy(update={"idempotency_key": None}))
            if key is not None:
                self._by_key[(table, key)] = query_id
            self.submissions += 1
            return query_id

    def poll(self, table: str, query_id: str) -> QueryRequest | dict[str, Any]:
        """The query's request once it may be answered, else its ``queryStatus`` object."""
        with self._lock:
            query = self._queries.get(query_id)
            if query is None or query.table != table or self.outcome == "expire":
                raise ApiError(404, "RESOURCE_DOES_NOT_EXIST", f"query {query_id} is unknown or has expired")
            query.polls += 1
            self.polls += 1
            if self.outcome == "fail":
                return status(query_id, "failed", errorMessage="the query failed (injected)")
            if query.polls <= (self.after_polls or 0):
                return status(query_id, "pending")
            return query.request

    def reset(self) -> None:
        with self._lock:
            self.after_polls, self.outcome, self.submissions, self.polls = None, "succeed", 0, 0
            self._queries.clear()
            self._by_key.clear()


def status(query_id: str, state: str, **extra: str) -> dict[str, Any]:
    return {"queryStatus": {"queryId": query_id, "status": state, **extra}}
