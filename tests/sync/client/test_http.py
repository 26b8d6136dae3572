"""Status mapping, retries with backoff / Retry-After / a total bound, and the httpx boundary."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from sharesync.sync.core.errors import (
    BadRequest,
    ConfigError,
    Forbidden,
    HistoryUnavailable,
    NotFound,
    Permanent,
    RateLimited,
    Retryable,
    ServerError,
    SharingHTTPError,
    TransportError,
    Unauthorized,
)
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.http_errors import HISTORY_UNAVAILABLE_PHRASES, parse_retry_after
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.transport import parse_capabilities

from .conftest import FIXTURES, TOKEN, FakeClock, error

Make = Callable[..., SharingClient]

DOCUMENTED = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    429: RateLimited,
    500: ServerError,
    503: ServerError,
}


def counting(
    *responses: httpx.Response | Exception,
) -> tuple[list[httpx.Request], Callable[[httpx.Request], httpx.Response]]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = responses[min(len(seen), len(responses)) - 1]
        if isinstance(item, Exception):
            raise item
        return item

    return seen, handler


@pytest.mark.parametrize("status", sorted(DOCUMENTED))
def test_every_documented_status_maps_to_its_class_with_code_and_message(make_client: Make, status: int) -> None:
    body = json.loads((FIXTURES / f"error_{status}.json").read_text())
    _seen, handler = counting(httpx.Response(status, json=body))
    client = make_client(handler, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(SharingHTTPError) as info:
        client.get_share("vaccine_share")
    exc = info.value
    assert type(exc) is DOCUMENTED[status]
    assert exc.status == status and exc.error_code == body["errorCode"]
    assert "get share 'vaccine_share'" in str(exc) and f"HTTP {status}" in str(exc)
    expected = redact(body["message"]) or httpx.codes.get_reason_phrase(status)
    assert exc.server_message.startswith(expected)
    assert isinstance(exc, Retryable) == (status in (429, 500, 503))
    assert isinstance(exc, Permanent) == (status in (400, 401, 403, 404))


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_are_not_retried(make_client: Make, status: int) -> None:
    seen, handler = counting(error(status))
    with pytest.raises(SharingHTTPError):
        make_client(handler).list_shares()
    assert len(seen) == 1


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504])
def test_transient_statuses_are_retried_until_success(make_client: Make, clock: FakeClock, status: int) -> None:
    seen, handler = counting(error(status), error(status), httpx.Response(200, json={"items": [{"name": "s"}]}))
    assert [s.name for s in make_client(handler).list_shares()] == ["s"]
    assert len(seen) == 3 and len(clock.sleeps) == 2
    assert all(0 <= s <= 2.0 for s in clock.sleeps)  # jittered, capped by max_backoff


def test_retry_after_is_honoured(make_client: Make, clock: FakeClock) -> None:
    _seen, handler = counting(
        error(429, **{"Retry-After": "7"}), error(503, **{"Retry-After": "3"}), httpx.Response(200, json={})
    )
    make_client(handler).list_shares()
    assert clock.sleeps == [7.0, 3.0]


def test_backoff_grows_exponentially_within_jitter(make_client: Make, clock: FakeClock) -> None:
    seen, handler = counting(error(500))
    policy = RetryPolicy(
        max_attempts=6, total_seconds=1e9, initial_backoff=1.0, max_backoff=1e9, sleep=clock.sleep, clock=clock
    )
    with pytest.raises(ServerError):
        make_client(handler, retry=policy).list_shares()
    assert len(seen) == 6
    # full jitter: attempt n waits uniformly in [0, 2^(n-1)]
    assert all(0 <= wait <= 2**n for n, wait in enumerate(clock.sleeps))


def test_attempts_are_bounded(make_client: Make, clock: FakeClock) -> None:
    seen, handler = counting(error(503))
    with pytest.raises(ServerError):
        make_client(handler).list_shares()
    assert len(seen) == 5  # max_attempts of the test policy


@pytest.mark.parametrize(("retry_after", "attempts"), [(None, 8), ("50", 3)])
def test_by_default_a_call_is_tried_8_times_within_120_seconds(
    make_client: Make, clock: FakeClock, retry_after: str | None, attempts: int
) -> None:
    """docs/guarantees.md's bound (the test policy of the other tests is tighter)."""
    seen, handler = counting(error(503, **({"Retry-After": retry_after} if retry_after else {})))
    defaults = dataclasses.replace(RetryPolicy(), sleep=clock.sleep, async_sleep=clock.async_sleep, clock=clock)
    start = clock.now
    with pytest.raises(ServerError):
        make_client(handler, retry=defaults).list_shares()
    assert len(seen) == attempts and clock.now - start <= 120


def test_total_retry_time_is_bounded(make_client: Make, clock: FakeClock) -> None:
    seen, handler = counting(error(503, **{"Retry-After": "25"}))
    start = clock.now
    with pytest.raises(ServerError) as info:
        make_client(handler).list_shares()
    # 25 + 25 = 50 s fits the 60 s bound, a third wait would not: stop instead of sleeping past it.
    assert clock.sleeps == [25.0, 25.0] and clock.now - start <= 60
    assert len(seen) == 3 and info.value.retry_after == 25.0


def test_the_time_bound_counts_from_the_first_failure(make_client: Make, clock: FakeClock) -> None:
    """A call that ran longer than the bound before it failed (a long stream cut off) is retried."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) == 1:
            clock.now += 600  # ten minutes of streaming, then the connection is reset
            raise httpx.ReadError("connection reset by peer")
        return httpx.Response(200, json={"items": [{"name": "a"}]})

    assert [share.name for share in make_client(handler).list_shares()] == ["a"]
    assert len(seen) == 2 and len(clock.sleeps) == 1


def test_a_retry_after_beyond_the_bound_fails_at_once(make_client: Make, clock: FakeClock) -> None:
    seen, handler = counting(error(429, **{"Retry-After": "3600"}))
    with pytest.raises(RateLimited):
        make_client(handler).list_shares()
    assert clock.sleeps == [] and len(seen) == 1


def test_connection_errors_are_retried_and_translated(make_client: Make, clock: FakeClock) -> None:
    url = "https://bucket.example.com/f.parquet?X-Amz-Signature=topsecret123"
    seen, handler = counting(httpx.ConnectError(f"connection refused to {url}"))
    with pytest.raises(TransportError) as info:
        make_client(handler).list_shares()
    assert len(seen) == 5
    message = str(info.value)
    assert "list shares: connection refused (https://sharing.example.com; ConnectError" in message
    assert "topsecret123" not in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # raw httpx text not chained


def test_a_request_that_cannot_be_sent_is_not_retried(make_client: Make, clock: FakeClock) -> None:
    seen, handler = counting(httpx.LocalProtocolError("Illegal header value b'Bearer tok\\n'"))
    with pytest.raises(ConfigError, match="could not be sent.*check the profile's token"):
        make_client(handler).list_shares()
    assert len(seen) == 1 and clock.sleeps == []


def test_read_timeouts_are_transport_errors(make_client: Make) -> None:
    seen, handler = counting(httpx.ReadTimeout("timed out"), httpx.Response(200, json={}))
    assert make_client(handler).list_shares() == []
    assert len(seen) == 2


def test_the_default_http_client_has_connect_and_read_timeouts() -> None:
    from sharesync.sync.protocol.profile import parse_profile
    from sharesync.sync.protocol.transport import Timeouts

    profile = parse_profile({"shareCredentialsVersion": 1, "endpoint": "https://srv.example.com", "bearerToken": TOKEN})
    with SharingClient(profile, timeouts=Timeouts(connect=3, read=9)) as client:
        assert client._client.timeout.connect == 3 and client._client.timeout.read == 9


def test_non_json_error_body_gives_status_and_a_short_redacted_snippet(make_client: Make) -> None:
    html = "<html><body>Bad gateway " + "x" * 5000 + f" Bearer {TOKEN}</body></html>"
    _seen, handler = counting(httpx.Response(502, text=html), httpx.Response(400, text=f"oops {TOKEN} " * 3))
    client = make_client(handler, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ServerError) as info:
        client.list_shares()
    message = str(info.value)
    assert message.startswith("list shares: HTTP 502: non-JSON error body: '<html><body>Bad gateway xxx")
    assert len(message) < 300
    with pytest.raises(BadRequest) as info2:
        client.list_shares()
    assert TOKEN not in str(info2.value) and "oops ***" in str(info2.value)


def test_empty_error_body_uses_the_reason_phrase(make_client: Make) -> None:
    _seen, handler = counting(httpx.Response(404))
    with pytest.raises(NotFound, match=r"HTTP 404: empty error body"):
        make_client(handler).get_share("x")


@pytest.mark.parametrize(
    "message",
    [
        "Version 3 of table s.sc.t is not available: the earliest available version is 5",  # local server
        "Error getting change data for range [0 , 4] as change data was not recorded for version [2]",
        "You can only query table data since version 5.",
        "Cannot time travel Delta table to version 1, Available versions: [3, 9].",
        "The provided timestamp (2020-01-01) is before the earliest version available to this table (3).",
        "s.sc.t: Cannot load table version 1 as the transaction log has been truncated due to manual deletion",
        "table files missing",
    ],
)
def test_history_unavailable_wordings(make_client: Make, message: str) -> None:
    seen, handler = counting(error(400, "INVALID_PARAMETER_VALUE", message))
    with pytest.raises(HistoryUnavailable) as info:
        make_client(handler).table_version("s.sc.t", starting_timestamp="2020-01-01")
    assert info.value.error_code == "INVALID_PARAMETER_VALUE" and len(seen) == 1
    assert any(p in message.lower() for p in HISTORY_UNAVAILABLE_PHRASES)


def test_other_bad_requests_stay_bad_requests(make_client: Make) -> None:
    _seen, handler = counting(error(400, "INVALID_PARAMETER_VALUE", "startingVersion cannot be negative."))
    with pytest.raises(BadRequest) as info:
        make_client(handler).get_share("x")
    assert type(info.value) is BadRequest


def test_401_with_an_expired_token_says_so(make_client: Make) -> None:
    _seen, handler = counting(error(401, "UNAUTHENTICATED", "bad token"))
    profile = {
        "shareCredentialsVersion": 1,
        "endpoint": "https://srv.example.com",
        "bearerToken": TOKEN,
        "expirationTime": "2020-01-01T00:00:00Z",
    }
    with pytest.raises(Unauthorized, match=r"bearerToken expired at 2020-01-01"):
        make_client(handler, profile=profile).list_shares()


def test_oauth_token_is_renewed_once_after_a_401(make_client: Make) -> None:
    tokens = iter(["oauth-token-aaa", "oauth-token-bbb"])
    api_auth: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            return httpx.Response(200, json={"access_token": next(tokens), "expires_in": 3600})
        api_auth.append(request.headers["Authorization"])
        if request.headers["Authorization"] == "Bearer oauth-token-aaa":
            return error(401, "UNAUTHENTICATED", "token revoked")
        return httpx.Response(200, json={"items": []})

    profile = {
        "shareCredentialsVersion": 2,
        "type": "oauth_client_credentials",
        "endpoint": "https://srv.example.com",
        "tokenEndpoint": "https://idp.example.com/token",
        "clientId": "c",
        "clientSecret": "oauth-cs-123",
    }
    assert make_client(handler, profile=profile).list_shares() == []
    assert api_auth == ["Bearer oauth-token-aaa", "Bearer oauth-token-bbb"]


def test_requests_carry_the_bearer_token_and_no_capabilities_on_listings(make_client: Make) -> None:
    seen, handler = counting(httpx.Response(200, json={}))
    make_client(handler).list_shares()
    assert seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert "delta-sharing-capabilities" not in seen[0].headers
    assert seen[0].headers["User-Agent"].startswith("sharesync/")


def test_parse_retry_after() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_parse_capabilities() -> None:
    assert parse_capabilities("responseformat=parquet;IncludeEndStreamAction=TRUE") == {
        "responseformat": "parquet",
        "includeendstreamaction": "true",
    }
    assert parse_capabilities(None) == {} and parse_capabilities("junk;=x") == {}


def test_retry_policy_from_env() -> None:
    policy = RetryPolicy.from_env({"SHARESYNC_RETRY_MAX_ATTEMPTS": "2", "SHARESYNC_RETRY_TOTAL_SECONDS": "1.5"})
    assert policy.max_attempts == 2 and policy.total_seconds == 1.5
    from sharesync.sync.core.errors import ConfigError

    with pytest.raises(ConfigError, match="SHARESYNC_RETRY_TOTAL_SECONDS='x' is not a number"):
        RetryPolicy.from_env({"SHARESYNC_RETRY_TOTAL_SECONDS": "x"})


def test_ca_bundle_errors_are_config_errors(tmp_path: pytest.TempPathFactory) -> None:
    from pathlib import Path

    from sharesync.sync.core.errors import ConfigError
    from sharesync.sync.protocol.tls import ssl_context

    with pytest.raises(ConfigError, match="ca_bundle .* does not exist"):
        ssl_context(Path("/nonexistent/ca.pem"))
    bad = Path(str(tmp_path)) / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(ConfigError, match="is not a PEM certificate file"):
        ssl_context(bad)


def test_default_trust_is_verified_from_the_start_and_loaded_on_first_tls_use(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pytest.TempPathFactory
) -> None:
    import ssl
    from pathlib import Path

    import certifi

    from sharesync.sync.core.errors import ConfigError
    from sharesync.sync.protocol.tls import DeferredTrustContext, ssl_context

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    context = ssl_context(None)
    assert isinstance(context, DeferredTrustContext)
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0  # nothing read yet
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="sharing.example.com")
    expected = ssl.create_default_context(cafile=certifi.where()).cert_store_stats()
    assert context.cert_store_stats() == expected  # what httpx's verify=True trusts

    # httpx's overrides are honoured, and a CA file that cannot be read is a config error
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    context = ssl_context(None)
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="sharing.example.com")
    assert context.cert_store_stats() == expected
    bad = Path(str(tmp_path)) / "missing.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(bad))
    context = ssl_context(None)
    with pytest.raises(ConfigError, match="cannot load trusted certificates from SSL_CERT_FILE"):
        context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="sharing.example.com")
