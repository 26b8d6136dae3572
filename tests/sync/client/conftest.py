"""Helpers for protocol-client tests: an injected transport, a fake clock (``support.monotonic``), NDJSON answers.

``httpx.MockTransport`` is the transport seam (the client is constructed with it), not a mock
of the client: every byte still goes through httpx, our status mapping and our stream parser.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.monotonic import FakeClock

from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import parse_profile
from sharesync.sync.protocol.retry import RetryPolicy

FIXTURES = Path(__file__).parent.parent / "fixtures"
ENDPOINT = "https://sharing.example.com/delta-sharing"
TOKEN = "dapi-test-token-0123456789"
SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]})
ECHO = "responseformat=parquet;includeendstreamaction=true"
# What every table request asks for (spec "Delta Sharing Capabilities Header"): either format.
ASKED = (
    "responseformat=delta,parquet;readerfeatures=deletionvectors,columnmapping,timestampntz,typewidening;"
    "includeendstreamaction=true"
)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def retry(clock: FakeClock) -> RetryPolicy:
    return RetryPolicy(
        max_attempts=5,
        total_seconds=60.0,
        initial_backoff=0.1,
        max_backoff=2.0,
        sleep=clock.sleep,
        async_sleep=clock.async_sleep,
        clock=clock,
    )


Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def make_client(retry: RetryPolicy) -> Iterable[Callable[..., SharingClient]]:
    clients: list[SharingClient] = []

    def make(handler: Handler, *, profile: dict[str, Any] | None = None, **kwargs: Any) -> SharingClient:
        raw = profile or {"shareCredentialsVersion": 1, "endpoint": ENDPOINT, "bearerToken": TOKEN}
        http = httpx.Client(transport=httpx.MockTransport(handler))
        kwargs.setdefault("retry", retry)
        client = SharingClient(parse_profile(raw), http=http, **kwargs)
        clients.append(client)
        return client

    yield make
    for c in clients:
        c._client.close()


# ---------------------------------------------------------------- NDJSON answers


def protocol() -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": 1}}


def metadata(**extra: Any) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "table-id",
            "format": {"provider": "parquet"},
            "schemaString": SCHEMA,
            "partitionColumns": [],
            **extra,
        }
    }


def file(file_id: str, size: int = 10, kind: str = "file", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "url": f"https://bucket.example.com/{file_id}.parquet?X-Amz-Signature=sig{file_id}secret",
        "id": file_id,
        "partitionValues": {},
        "size": size,
        **extra,
    }
    if kind != "file":
        body.setdefault("timestamp", 1_700_000_000_000)
        body.setdefault("version", 1)
    return {kind: body}


def end(**fields: Any) -> dict[str, Any]:
    return {"endStreamAction": fields}


def ndjson(
    lines: Iterable[dict[str, Any] | str],
    *,
    version: int | None = 5,
    echo: bool = True,
    headers: dict[str, str] | None = None,
    tail: str = "\n",
) -> httpx.Response:
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + tail
    h = {"Content-Type": "application/x-ndjson; charset=utf-8"}
    if version is not None:
        h["Delta-Table-Version"] = str(version)
    if echo:
        h["delta-sharing-capabilities"] = ECHO
    h.update(headers or {})
    return httpx.Response(200, headers=h, content=text.encode())


def error(status: int, code: str = "SOME_ERROR", message: str = "went wrong", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"errorCode": code, "message": message}, headers=headers)
