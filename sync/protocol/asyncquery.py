"""Asynchronous queries (spec "asyncQuery", "Get Query Info"): submit once, poll, resume after a kill.

A submission carries ``asyncquery=true`` and an ``idempotencyKey``. A server that does not
know the capability answers synchronously (the spec requires clients to accept that); one that
does answers with a ``queryStatus`` line holding a ``queryId``, polled with waits from
:class:`~sharesync.sync.protocol.retry.PollPolicy` until the files come back (paged like any
query) or the status is ``failed``.

The submission is written to a :class:`SubmissionLog` before anything is sent (the key) and
again once answered (the ``queryId``), so a process killed while the provider computes leaves
enough behind for the next one to poll the same query — or, killed before the answer, to
resubmit with the same key, which a deduplicating server maps to the same query. A query the
server no longer knows (404: expired or unknown) or reports failed is forgotten; the next
submission gets a new key. A timeout keeps the record: the next run resumes polling.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from sharesync.sync.core.errors import AsyncQueryFailed, NotFound, ProtocolViolation
from sharesync.sync.protocol.ndjson import ANY_FILES
from sharesync.sync.protocol.responses import TableRef
from sharesync.sync.protocol.retry import PollPolicy
from sharesync.sync.protocol.streams import FileStream, StreamCall, open_first_page
from sharesync.sync.protocol.transport import SharingHttp
from sharesync.sync.protocol.wire import QueryInfoRequest, QueryRequest, QueryStatus

PENDING, FAILED = "pending", "failed"


@dataclass(frozen=True)
class Submission:
    """What is kept of one asynchronous query between processes."""

    table: str
    request_key: str
    idempotency_key: str
    query_id: str | None = None
    start_version: int | None = None
    end_version: int | None = None


class SubmissionLog(Protocol):
    """Where submissions are kept (the state store, through an adapter in the run layer)."""

    def load(self, table: str, request_key: str) -> Submission | None: ...

    def save(self, submission: Submission) -> None: ...

    def clear(self, table: str, request_key: str) -> None: ...


def request_key(request: QueryRequest) -> str:
    """A digest of what the query asks for: equal requests resume one another's submission.

    Paging, refresh and idempotency fields are left out; hints and versions are in (the spec
    only deduplicates a key reused with "the same request parameters").
    """
    body = request.model_copy(update={"page_token": None, "refresh_token": None, "idempotency_key": None})
    return hashlib.sha256(json.dumps(body.to_wire(), sort_keys=True).encode()).hexdigest()[:32]


class AsyncQuery:
    """One logical query of one table, submitted asynchronously and polled to its answer.

    ``submit(key)`` builds the submission's call; ``poll_url`` is the table's ``queries/``
    URL prefix. :meth:`open` returns the answer's stream; call :meth:`finished` once it has
    been read to the end, so the next run submits afresh.
    """

    def __init__(
        self,
        http: SharingHttp,
        ref: TableRef,
        request: QueryRequest,
        *,
        log: SubmissionLog,
        policy: PollPolicy,
        submit: Callable[[QueryRequest], StreamCall],
        query_url: Callable[[str], str],
    ) -> None:
        self._http, self._ref, self._request, self._log, self._policy = http, ref, request, log, policy
        self._submit, self._query_url = submit, query_url
        self._key = request_key(request)

    def open(self) -> FileStream:
        known = self._log.load(str(self._ref), self._key)
        if known is not None and known.query_id is not None:
            stream = self._poll(known.query_id, resumed=True)
            if stream is not None:
                return stream
            known = None  # expired or unknown: a new key, a new query
        if known is None:
            known = self._new_submission()
            self._log.save(known)
        call = self._submit(self._request.model_copy(update={"idempotency_key": known.idempotency_key}))
        answer, budget = open_first_page(self._http, call)
        if not isinstance(answer, QueryStatus):
            return FileStream(self._http, call, (answer, budget))  # the server answered synchronously
        self._check(answer)
        self._log.save(replace(known, query_id=answer.query_id))
        stream = self._poll(answer.query_id, resumed=False)
        assert stream is not None  # a fresh query that is unknown at once raised in _poll
        return stream

    def finished(self) -> None:
        self._log.clear(str(self._ref), self._key)

    def _new_submission(self) -> Submission:
        request = self._request
        start = request.starting_version if request.starting_version is not None else request.version
        end = request.ending_version if request.starting_version is not None else request.version
        return Submission(str(self._ref), self._key, uuid.uuid4().hex, None, start, end)

    def _poll(self, query_id: str, *, resumed: bool) -> FileStream | None:
        """The answer of ``query_id``; None when a resumed query is no longer known to the server."""
        call = self._poll_call(query_id)
        waits = self._policy.waits()
        while True:
            try:
                answer, budget = open_first_page(self._http, call)
            except NotFound:
                self.finished()
                if resumed:
                    return None
                raise AsyncQueryFailed(
                    f"{call.context}: the server no longer knows query {query_id} it just accepted; run again "
                    "to submit it anew",
                    query_id=query_id,
                ) from None
            if not isinstance(answer, QueryStatus):
                return FileStream(self._http, call, (answer, budget))
            self._check(answer)
            wait = next(waits, None)
            if wait is None:
                raise AsyncQueryFailed(
                    f"{call.context}: query {query_id} is still pending after {self._policy.timeout:g} s; the next "
                    "run resumes polling it (raise SHARESYNC_ASYNC_TIMEOUT_SECONDS to wait longer)",
                    query_id=query_id,
                )
            self._policy.sleep(wait)

    def _check(self, status: QueryStatus) -> None:
        if status.status == FAILED:
            self.finished()
            reason = status.error_message or "no reason given"
            raise AsyncQueryFailed(
                f"query {self._ref}: the server failed query {status.query_id}: {reason}; the next run submits it anew",
                query_id=status.query_id,
            )
        if status.status != PENDING:
            raise ProtocolViolation(
                f"query {self._ref}: query {status.query_id} has status {status.status!r}; the spec knows "
                f"{PENDING!r} and {FAILED!r}"
            )

    def _poll_call(self, query_id: str) -> StreamCall:
        max_files = self._request.max_files

        def page_request(token: str | None) -> tuple[None, dict[str, object]]:
            return None, QueryInfoRequest(max_files=max_files, page_token=token).to_wire()

        return StreamCall(
            "POST",
            self._query_url(query_id),
            f"query {self._ref} (query {query_id})",
            page_request,
            ANY_FILES,
            str(self._ref),
            self._request.starting_version is not None,
            may_pend=True,
        )
