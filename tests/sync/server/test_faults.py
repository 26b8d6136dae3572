"""Every fault knob changes what a client observes, on a running server, and only while set."""

from __future__ import annotations

import time

import httpx
import pytest
from pydantic import ValidationError
from support.faults import Faults, SharingServer

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.wire import EndStreamAction, File, parse_action

from .support import END_STREAM, ORDERS, actions, error


def _a_file(api: httpx.Client) -> File:
    return next(a for a in actions(api.post(f"{ORDERS}/query", json={})) if isinstance(a, File))


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (503, "TEMPORARILY_UNAVAILABLE"),
        (500, "TEMPORARILY_UNAVAILABLE"),
        (429, "RESOURCE_EXHAUSTED"),
        (403, "PERMISSION_DENIED"),
        (401, "UNAUTHENTICATED"),
        (404, "RESOURCE_DOES_NOT_EXIST"),
    ],
)
def test_injected_errors_with_retry_after_and_budget(
    api: httpx.Client, sharing_server: SharingServer, status: int, code: str
) -> None:
    faults = sharing_server.faults
    faults.error_rate, faults.error_status, faults.retry_after, faults.budget = 1.0, status, 2.5, 2
    for _ in range(2):
        response = api.get("/shares")
        assert error(response, status)["errorCode"] == code
        assert response.headers["Retry-After"] == "2.5"
    assert api.get("/shares").status_code == 200  # budget spent
    assert faults.faulted == 2 and faults.budget == 0


def test_error_rate_is_random_but_replayable(api: httpx.Client, sharing_server: SharingServer) -> None:
    faults = sharing_server.faults

    def statuses() -> list[int]:
        faults.seed = 11
        return [api.get(f"{ORDERS}/version").status_code for _ in range(24)]

    faults.error_rate = 0.5
    first = statuses()
    assert first == statuses()
    assert set(first) == {200, 503}


def test_files_are_not_api_calls(api: httpx.Client, sharing_server: SharingServer) -> None:
    file = _a_file(api)
    sharing_server.faults.error_rate = 1.0
    assert httpx.get(file.url).status_code == 200


def test_drop_end_stream_action(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.faults.drop_end_stream_action = True
    lines = actions(api.post(f"{ORDERS}/query", json={}, headers=END_STREAM))
    assert isinstance(lines[-1], File) and not any(isinstance(a, EndStreamAction) for a in lines)


def test_end_stream_error_message(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.faults.end_stream_error = "the provider failed half way"
    end = actions(api.post(f"{ORDERS}/query", json={}, headers=END_STREAM))[-1]
    assert isinstance(end, EndStreamAction) and end.error_message == "the provider failed half way"


def test_truncated_stream_ends_mid_line(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.faults.truncate_stream = True
    response = api.get(f"{ORDERS}/metadata")
    assert response.status_code == 200 and not response.text.endswith("\n")
    protocol, cut = response.text.split("\n")
    parse_action(protocol)
    with pytest.raises(ProtocolViolation):
        parse_action(cut)


def test_dropped_connection_mid_stream(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.faults.drop_connection = True
    received: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError), api.stream("POST", f"{ORDERS}/query", json={}) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            received.append(line)
    assert [type(parse_action(line)).__name__ for line in received] == ["Protocol"]
    sharing_server.faults.drop_connection = False
    assert len(actions(api.post(f"{ORDERS}/query", json={}))) > 2  # the next call is fine again


@pytest.mark.parametrize("delta", [7, -7])
def test_files_served_with_a_different_length(api: httpx.Client, sharing_server: SharingServer, delta: int) -> None:
    file = _a_file(api)
    sharing_server.faults.file_size_delta = delta
    response = httpx.get(file.url)
    assert response.status_code == 200 and len(response.content) == file.size + delta
    assert int(response.headers["content-length"]) == file.size + delta


def test_dropped_file_download(api: httpx.Client, sharing_server: SharingServer) -> None:
    file = _a_file(api)
    sharing_server.faults.drop_file_connection = True
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(file.url)


def test_download_delay(api: httpx.Client, sharing_server: SharingServer) -> None:
    file = _a_file(api)
    sharing_server.faults.download_delay_seconds = 0.3
    started = time.monotonic()
    assert httpx.get(file.url).status_code == 200
    assert time.monotonic() - started >= 0.3


def test_url_lifetime(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.faults.url_ttl_seconds = 42
    before = sharing_server.clock.now_ms()
    file = _a_file(api)
    assert file.expiration_timestamp is not None
    assert before + 42_000 <= file.expiration_timestamp <= sharing_server.clock.now_ms() + 42_000


def test_knobs_are_validated_and_reset() -> None:
    faults = Faults()
    with pytest.raises(ValidationError):
        faults.error_rate = 1.5
    faults.truncate_stream, faults.url_ttl_seconds = True, 5
    faults.reset()
    assert not faults.truncate_stream and faults.url_ttl_seconds == 5
