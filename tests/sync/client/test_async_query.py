"""Asynchronous queries: submit with a key, poll Get Query Info, resume a recorded query, give up clearly.

The server side is an ``httpx.MockTransport`` handler (the real client, httpx and our parser run);
the submission log is an in-memory :class:`SubmissionLog`, standing in for the state store.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.monotonic import FakeClock

from sharesync.sync.core.errors import AsyncQueryFailed, ProtocolViolation
from sharesync.sync.protocol.asyncquery import Submission, request_key
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.retry import PollPolicy
from sharesync.sync.protocol.wire import QueryRequest

from .conftest import end, error, file, metadata, ndjson, protocol

QUERY = "/delta-sharing/shares/s/schemas/sc/tables/t/query"
QUERIES = "/delta-sharing/shares/s/schemas/sc/tables/t/queries/"


class MemoryLog:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Submission] = {}
        self.saved: list[Submission] = []

    def load(self, table: str, request_key: str) -> Submission | None:
        return self.rows.get((table, request_key))

    def save(self, submission: Submission) -> None:
        self.saved.append(submission)
        self.rows[(submission.table, submission.request_key)] = submission

    def clear(self, table: str, request_key: str) -> None:
        self.rows.pop((table, request_key), None)


def status(query_id: str, state: str = "pending", **extra: Any) -> httpx.Response:
    line = {"queryStatus": {"queryId": query_id, "status": state, **extra}}
    headers = {"delta-sharing-capabilities": "asyncquery=true"}
    return ndjson([line], version=None, echo=False, headers=headers)


def answer(*ids: str, next_page: str | None = None) -> httpx.Response:
    ending = end(nextPageToken=next_page) if next_page else end()
    return ndjson([protocol(), metadata(), *(file(i) for i in ids), ending], version=7)


class Provider:
    """Answers submissions with ``q-1`` and polls with ``pending`` until ``pending_polls`` ran out."""

    def __init__(self, pending_polls: int = 2, *, on_poll: Callable[[int], httpx.Response] | None = None) -> None:
        self.pending_polls = pending_polls
        self.on_poll = on_poll
        self.submitted: list[dict[str, Any]] = []
        self.capabilities: list[str] = []
        self.polls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        if request.url.path == QUERY:
            self.submitted.append(body)
            self.capabilities.append(request.headers.get("delta-sharing-capabilities", ""))
            return status("q-1")
        assert request.url.path.startswith(QUERIES), request.url.path
        self.polls.append((request.url.path.removeprefix(QUERIES), body))
        if self.on_poll is not None:
            return self.on_poll(len(self.polls))
        if len(self.polls) <= self.pending_polls:
            return status("q-1")
        if body.get("pageToken") == "p2":
            return answer("f3")
        return answer("f1", "f2", next_page="p2")


@pytest.fixture
def polling(clock: FakeClock) -> PollPolicy:
    return PollPolicy(initial=1.0, max_wait=4.0, timeout=30.0, sleep=clock.sleep, clock=clock)


def run(client: SharingClient, log: MemoryLog) -> list[str]:
    return [f.id for f in client.query("s.sc.t", version=7, submissions=log).files]


def test_a_pending_query_is_polled_with_growing_waits_and_paged_to_the_end(
    make_client: Callable[..., SharingClient], polling: PollPolicy, clock: FakeClock
) -> None:
    provider = Provider(pending_polls=3)
    log = MemoryLog()
    assert run(make_client(provider, polling=polling), log) == ["f1", "f2", "f3"]
    assert provider.capabilities[0].endswith(";asyncquery=true")
    key = provider.submitted[0]["idempotencyKey"]
    assert key and provider.submitted[0]["version"] == 7
    assert [path for path, _ in provider.polls] == ["q-1"] * 5
    assert provider.polls[-1][1] == {"pageToken": "p2"}  # Get Query Info pages like a query
    assert clock.sleeps == [1.0, 2.0, 4.0]  # doubling, capped at max_wait
    # Recorded before polling (key first, then the queryId), and gone once the answer was read.
    assert [(s.idempotency_key, s.query_id, s.end_version) for s in log.saved] == [(key, None, 7), (key, "q-1", 7)]
    assert log.rows == {}


def test_a_synchronous_answer_to_an_async_submission_is_read_as_is(
    make_client: Callable[..., SharingClient], polling: PollPolicy
) -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return answer("f1")

    log = MemoryLog()
    assert run(make_client(handler, polling=polling), log) == ["f1"]
    assert len(sent) == 1 and "idempotencyKey" in sent[0]
    assert log.rows == {}


def test_a_recorded_query_is_resumed_without_a_new_submission(
    make_client: Callable[..., SharingClient], polling: PollPolicy
) -> None:
    provider = Provider(pending_polls=1)
    log = MemoryLog()
    key = request_key(QueryRequest(version=7))
    log.save(Submission("s.sc.t", key, "old-key", "q-1", 7, 7))
    assert run(make_client(provider, polling=polling), log) == ["f1", "f2", "f3"]
    assert provider.submitted == []
    assert log.rows == {}


def test_a_recorded_key_without_a_query_id_is_submitted_again_with_the_same_key(
    make_client: Callable[..., SharingClient], polling: PollPolicy
) -> None:
    provider = Provider(pending_polls=0)
    log = MemoryLog()
    log.save(Submission("s.sc.t", request_key(QueryRequest(version=7)), "kept-key", None, 7, 7))
    run(make_client(provider, polling=polling), log)
    assert [s["idempotencyKey"] for s in provider.submitted] == ["kept-key"]


def test_an_expired_recorded_query_is_resubmitted_with_a_new_key(
    make_client: Callable[..., SharingClient], polling: PollPolicy
) -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path == QUERY:
            return status("q-2")
        if request.url.path.endswith("/q-old"):
            return error(404, "QUERY_NOT_FOUND", "query expired")
        return answer("f1")

    log = MemoryLog()
    log.save(Submission("s.sc.t", request_key(QueryRequest(version=7)), "old-key", "q-old", 7, 7))
    assert run(make_client(handler, polling=polling), log) == ["f1"]
    assert [c.rsplit("/", 1)[-1] for c in calls] == ["q-old", "query", "q-2"]
    assert log.saved[-1].idempotency_key != "old-key" and log.saved[-1].query_id == "q-2"
    assert log.rows == {}


def test_a_failed_query_names_itself_and_is_forgotten(
    make_client: Callable[..., SharingClient], polling: PollPolicy
) -> None:
    provider = Provider(on_poll=lambda n: status("q-1", "failed", errorMessage="out of memory"))
    log = MemoryLog()
    with pytest.raises(AsyncQueryFailed, match=r"failed query q-1: out of memory; the next run submits it anew") as err:
        run(make_client(provider, polling=polling), log)
    assert err.value.query_id == "q-1"
    assert log.rows == {}


def test_a_query_pending_past_the_timeout_is_kept_for_the_next_run(
    make_client: Callable[..., SharingClient], polling: PollPolicy, clock: FakeClock
) -> None:
    provider = Provider(pending_polls=10_000)
    log = MemoryLog()
    with pytest.raises(AsyncQueryFailed, match=r"query q-1 is still pending after 30 s; the next run resumes"):
        run(make_client(provider, polling=polling), log)
    assert sum(clock.sleeps) <= 30.0
    (kept,) = log.rows.values()
    assert kept.query_id == "q-1"


def test_an_unknown_status_is_a_protocol_violation(
    make_client: Callable[..., SharingClient], polling: PollPolicy
) -> None:
    provider = Provider(on_poll=lambda n: status("q-1", "running"))
    with pytest.raises(ProtocolViolation, match=r"status 'running'"):
        run(make_client(provider, polling=polling), MemoryLog())


def test_without_a_log_the_query_is_synchronous_and_carries_no_key(make_client: Callable[..., SharingClient]) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append((request.headers["delta-sharing-capabilities"], json.loads(request.content)))
        return answer("f1")

    make_client(handler).query("s.sc.t", version=7)
    ((capabilities, body),) = sent
    assert "asyncquery" not in capabilities and "idempotencyKey" not in body


def test_request_keys_differ_by_hints_and_versions_but_not_by_page_or_key() -> None:
    base = QueryRequest(version=7, predicate_hints=["id > 1"])
    assert request_key(base) == request_key(base.model_copy(update={"page_token": "p", "idempotency_key": "k"}))
    assert request_key(base) != request_key(base.model_copy(update={"version": 8}))
    assert request_key(base) != request_key(base.model_copy(update={"predicate_hints": ["id > 2"]}))
