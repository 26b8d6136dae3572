"""The local server's asynchronous queries: submission, idempotency by key, polling, paging, failure, expiry."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from support.faults import SharingServer

from sharesync.sync.core.errors import AsyncQueryFailed
from sharesync.sync.protocol.asyncquery import Submission, request_key
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.options import build_query
from sharesync.sync.protocol.profile import parse_profile
from sharesync.sync.protocol.retry import PollPolicy
from sharesync.sync.protocol.wire import EndStreamAction, File

from .support import ORDERS, actions, error

ASYNC = {"delta-sharing-capabilities": "responseformat=parquet;includeendstreamaction=true;asyncquery=true"}


def submit(api: httpx.Client, key: str | None = "k-1", **body: Any) -> httpx.Response:
    return api.post(f"{ORDERS}/query", json={**body, **({"idempotencyKey": key} if key else {})}, headers=ASYNC)


def query_status(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    assert "Delta-Table-Version" not in response.headers  # spec: only once the query has succeeded
    (line,) = response.text.splitlines()
    found: dict[str, Any] = json.loads(line)["queryStatus"]
    return found


def poll(api: httpx.Client, query_id: str, **body: Any) -> httpx.Response:
    return api.post(f"{ORDERS}/queries/{query_id}", json=body, headers=ASYNC)


def test_without_the_option_asyncquery_is_ignored_and_answered_synchronously(
    api: httpx.Client, sharing_server: SharingServer
) -> None:
    response = submit(api)
    assert response.headers["Delta-Table-Version"]
    assert any(isinstance(a, File) for a in actions(response))
    assert sharing_server.queries.submissions == 0


def test_a_query_pends_for_n_polls_then_answers_in_pages(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.queries.after_polls = 2
    first = submit(api)
    assert first.headers["delta-sharing-capabilities"] == "asyncquery=true"
    pending = query_status(first)
    assert pending["status"] == "pending"
    # The same key is the same query; another key is another query.
    assert query_status(submit(api))["queryId"] == pending["queryId"]
    assert query_status(submit(api, key="k-2"))["queryId"] != pending["queryId"]
    assert sharing_server.queries.submissions == 2

    assert [query_status(poll(api, pending["queryId"]))["status"] for _ in range(2)] == ["pending", "pending"]
    page = poll(api, pending["queryId"], maxFiles=1)
    assert page.headers["Delta-Table-Version"]
    lines = actions(page)
    end = lines[-1]
    assert isinstance(end, EndStreamAction) and end.next_page_token
    rest = actions(poll(api, pending["queryId"], maxFiles=1, pageToken=end.next_page_token))
    assert [a.id for a in lines + rest if isinstance(a, File)] == [
        a.id for a in actions(api.post(f"{ORDERS}/query", json={})) if isinstance(a, File)
    ][:2]


def test_failed_and_expired_queries(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.queries.after_polls = 0
    query_id = query_status(submit(api))["queryId"]
    sharing_server.queries.outcome = "fail"
    failed = query_status(poll(api, query_id))
    assert failed["status"] == "failed" and failed["errorMessage"]
    sharing_server.queries.outcome = "expire"
    assert error(poll(api, query_id), 404)["errorCode"] == "RESOURCE_DOES_NOT_EXIST"
    sharing_server.queries.outcome = "succeed"
    assert error(poll(api, "q-never-issued"), 404)["errorCode"] == "RESOURCE_DOES_NOT_EXIST"


def test_a_bad_request_fails_at_submission(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.queries.after_polls = 0
    error(submit(api, version=1, timestamp="2020-01-01T00:00:00Z"), 400)
    assert sharing_server.queries.submissions == 0


class MemoryLog:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Submission] = {}

    def load(self, table: str, request_key: str) -> Submission | None:
        return self.rows.get((table, request_key))

    def save(self, submission: Submission) -> None:
        self.rows[(submission.table, submission.request_key)] = submission

    def clear(self, table: str, request_key: str) -> None:
        self.rows.pop((table, request_key), None)


@pytest.fixture
def client(sharing_server: SharingServer) -> SharingClient:
    profile = parse_profile(sharing_server.profile())
    waits: list[float] = []
    return SharingClient(profile, polling=PollPolicy(initial=0.0, max_wait=0.0, timeout=1.0, sleep=waits.append))


def test_the_client_reads_an_async_answer_like_a_synchronous_one(
    client: SharingClient, sharing_server: SharingServer
) -> None:
    sharing_server.queries.after_polls = 3
    log = MemoryLog()
    with client:
        answered = client.query("demo.sales.orders", submissions=log)
        plain = client.query("demo.sales.orders")
    assert sorted(f.id for f in answered.files) == sorted(f.id for f in plain.files)
    assert answered.version == plain.version
    assert sharing_server.queries.submissions == 1 and log.rows == {}


def test_the_client_resubmits_an_expired_query_and_reports_a_failed_one(
    client: SharingClient, sharing_server: SharingServer
) -> None:
    sharing_server.queries.after_polls = 0
    log = MemoryLog()
    with client:
        # A query recorded by an earlier process, which the server no longer knows.
        key = request_key(build_query(None))
        log.save(Submission("demo.sales.orders", key, "old-key", "q-gone"))
        assert client.query("demo.sales.orders", submissions=log).files
        assert sharing_server.queries.submissions == 1
        sharing_server.queries.outcome = "fail"
        with pytest.raises(AsyncQueryFailed, match=r"the server failed query q-\w+: the query failed \(injected\)"):
            client.query("demo.sales.orders", submissions=log)
    assert log.rows == {}
