"""Profile files: every version and type, valid and broken; expiry; OAuth token caching."""

from __future__ import annotations

import json
import logging
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import ConfigError, ProtocolViolation, ServerError, Unauthorized
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.profile import (
    BasicProfile,
    BearerTokenProfile,
    OAuthClientCredentialsProfile,
    OAuthCredentials,
    load_profile,
    parse_profile,
)

from .conftest import FIXTURES

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def write(tmp_path: Path, content: Any, name: str = "p.share") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def v1(**extra: Any) -> dict[str, Any]:
    return {"shareCredentialsVersion": 1, "endpoint": "https://srv.example.com/ds/", "bearerToken": "tok-v1-abcdef", **extra}


def test_spec_example_profile_loads_when_expiry_is_allowed() -> None:
    profile = load_profile(FIXTURES / "profile_v1.share", allow_expired=True)
    assert isinstance(profile, BearerTokenProfile)
    assert profile.endpoint == "https://sharing.delta.io/delta-sharing"  # trailing slash dropped
    assert profile.expiration_time == datetime(2021, 11, 12, 0, 12, 29, tzinfo=UTC)


def test_spec_example_profile_is_refused_because_it_expired() -> None:
    with pytest.raises(ConfigError, match=r"profile_v1.share: the profile's bearerToken expired at 2021-11-12.*new profile"):
        load_profile(FIXTURES / "profile_v1.share")


def test_v1_bearer(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, v1()), now=NOW)
    assert isinstance(profile, BearerTokenProfile) and profile.expiration_time is None
    assert profile.credentials().auth_header() == {"Authorization": "Bearer tok-v1-abcdef"}
    assert not profile.expires_within(10_000, now=NOW)


def test_v2_bearer_token_type(tmp_path: Path) -> None:
    raw = {**v1(), "shareCredentialsVersion": 2, "type": "bearer_token", "expirationTime": "2025-12-01T00:00:00Z"}
    profile = load_profile(write(tmp_path, raw), now=NOW)
    assert isinstance(profile, BearerTokenProfile)
    assert profile.expires_within(200, now=NOW) and not profile.expires_within(100, now=NOW)


def test_v2_basic(tmp_path: Path) -> None:
    raw = {"shareCredentialsVersion": 2, "type": "basic", "endpoint": "https://srv.example.com", "username": "u",
           "password": "pw-secret-123"}
    profile = load_profile(write(tmp_path, raw))
    assert isinstance(profile, BasicProfile)
    header = profile.credentials().auth_header()["Authorization"]
    assert header == "Basic " + __import__("base64").b64encode(b"u:pw-secret-123").decode()
    assert redact(f"sent {header}") == "sent Basic ***"


def test_v2_oauth(tmp_path: Path) -> None:
    raw = {"shareCredentialsVersion": 2, "type": "oauth_client_credentials", "endpoint": "https://srv.example.com",
           "tokenEndpoint": "https://idp.example.com/token", "clientId": "cid", "clientSecret": "csecret-123456",
           "scope": "sharing"}
    profile = load_profile(write(tmp_path, raw))
    assert isinstance(profile, OAuthClientCredentialsProfile) and profile.scope == "sharing"
    assert not profile.expires_within(1)


def test_unknown_fields_are_ignored(tmp_path: Path) -> None:
    assert isinstance(load_profile(write(tmp_path, v1(futureField={"a": 1}))), BearerTokenProfile)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", r"p.share' is not valid JSON \(.*line 1\); re-download"),
        ("[1]", r"must be a JSON object"),
        ({"endpoint": "https://x"}, r"shareCredentialsVersion: required field is missing"),
        ({**v1(), "shareCredentialsVersion": 3}, r"shareCredentialsVersion: 3 is not supported .*upgrade sharesync"),
        ({**v1(), "shareCredentialsVersion": "1"}, r"shareCredentialsVersion: '1' is not supported .*use 1 or 2"),
        ({**v1(), "shareCredentialsVersion": 2}, r"type: None is not supported for shareCredentialsVersion 2"),
        ({**v1(), "shareCredentialsVersion": 2, "type": "oauth_jwt"}, r"type: 'oauth_jwt' is not supported"),
        ({"shareCredentialsVersion": 1, "endpoint": "https://x"}, r"p.share: field 'bearerToken' is missing"),
        ({**v1(), "bearerToken": "  "}, r"field 'bearerToken' must not be empty"),
        ({**v1(), "endpoint": "ftp://x"}, r"field 'endpoint' must be an http\(s\) URL, not 'ftp://x'"),
        ({**v1(), "expirationTime": "next tuesday"}, r"field 'expirationTime' must be an ISO-8601 timestamp like .*, not 'next tuesday'"),
        (
            {"shareCredentialsVersion": 2, "type": "oauth_client_credentials", "endpoint": "https://x",
             "clientId": "c", "clientSecret": "s-123456"},
            r"field 'tokenEndpoint' is missing",
        ),
        (
            {"shareCredentialsVersion": 2, "type": "basic", "endpoint": "https://x", "username": "u"},
            r"field 'password' is missing",
        ),
    ],
)
def test_broken_profiles_name_file_field_and_fix(tmp_path: Path, content: Any, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected) as info:
        load_profile(write(tmp_path, content))
    assert str(tmp_path / "p.share") in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"profile file '.*nope.share' not found; download the profile"):
        load_profile(tmp_path / "nope.share")


def test_expiring_soon_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, v1(expirationTime=(NOW + timedelta(days=3)).isoformat()))
    with caplog.at_level(logging.WARNING, logger="sharesync.sync.protocol.profile"):
        load_profile(path, now=NOW)
    assert any("expires at 2025-06-04" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sharesync.sync.protocol.profile"):
        load_profile(write(tmp_path, v1(expirationTime="2025-07-01T00:00:00Z")), now=NOW)
    assert not caplog.records


def test_secrets_never_in_repr_and_registered_on_load(tmp_path: Path) -> None:
    raw = {"shareCredentialsVersion": 2, "type": "oauth_client_credentials", "endpoint": "https://srv.example.com",
           "tokenEndpoint": "https://idp.example.com/token", "clientId": "cid", "clientSecret": "oauth-secret-value"}
    profile = parse_profile(raw)
    bearer = parse_profile(v1(bearerToken="bearer-secret-value"))
    for text in (repr(profile), str(profile), repr(bearer), repr(bearer.credentials()), repr(profile.credentials())):
        assert "oauth-secret-value" not in text and "bearer-secret-value" not in text
    assert redact("x oauth-secret-value y bearer-secret-value") == "x *** y ***"


def test_a_secret_in_a_broken_profile_is_still_registered() -> None:
    with pytest.raises(ConfigError):
        parse_profile({"shareCredentialsVersion": 1, "endpoint": "nope", "bearerToken": "leaky-token-987"})
    assert redact("leaky-token-987") == "***"


# ---------------------------------------------------------------- OAuth tokens


class TokenServer:
    def __init__(self, *responses: httpx.Response) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]


def oauth_profile() -> OAuthClientCredentialsProfile:
    profile = parse_profile({"shareCredentialsVersion": 2, "type": "oauth_client_credentials",
                             "endpoint": "https://srv.example.com", "tokenEndpoint": "https://idp.example.com/token",
                             "clientId": "cid", "clientSecret": "csecret-123456", "scope": "sharing"})
    assert isinstance(profile, OAuthClientCredentialsProfile)
    return profile


def test_oauth_token_is_fetched_once_cached_and_renewed_before_expiry() -> None:
    server = TokenServer(
        httpx.Response(200, json={"access_token": "access-one-123", "expires_in": 3600, "token_type": "Bearer"}),
        httpx.Response(200, json={"access_token": "access-two-456", "expires_in": "3600"}),
    )
    now = [0.0]
    creds = OAuthCredentials(oauth_profile(), http=httpx.Client(transport=httpx.MockTransport(server)),
                             clock=lambda: now[0])
    assert creds.auth_header() == {"Authorization": "Bearer access-one-123"}
    now[0] = 3000.0
    assert creds.auth_header() == {"Authorization": "Bearer access-one-123"}  # still > 5 min left
    now[0] = 3301.0
    assert creds.auth_header() == {"Authorization": "Bearer access-two-456"}  # renewed 5 min early
    assert creds.fetches == 2
    request = server.requests[0]
    assert request.method == "POST" and str(request.url) == "https://idp.example.com/token"
    assert request.headers["Authorization"] == "Basic " + __import__("base64").b64encode(b"cid:csecret-123456").decode()
    assert dict(httpx.QueryParams(request.content.decode())) == {"grant_type": "client_credentials", "scope": "sharing"}
    assert redact("access-one-123") == "***"  # fetched tokens are secrets too


def test_short_lived_tokens_are_renewed_at_half_life_not_on_every_call() -> None:
    server = TokenServer(httpx.Response(200, json={"access_token": "short-lived-1", "expires_in": 60}))
    now = [0.0]
    creds = OAuthCredentials(oauth_profile(), http=httpx.Client(transport=httpx.MockTransport(server)),
                             clock=lambda: now[0])
    creds.auth_header()
    now[0] = 29.0
    creds.auth_header()
    assert creds.fetches == 1
    now[0] = 31.0
    creds.auth_header()
    assert creds.fetches == 2


def test_concurrent_callers_share_one_fetch() -> None:
    gate = threading.Event()

    def slow(request: httpx.Request) -> httpx.Response:
        gate.wait(5)
        return httpx.Response(200, json={"access_token": "shared-token-1", "expires_in": 3600})

    creds = OAuthCredentials(oauth_profile(), http=httpx.Client(transport=httpx.MockTransport(slow)))
    headers: list[dict[str, str]] = []
    threads = [threading.Thread(target=lambda: headers.append(creds.auth_header())) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert creds.fetches == 1 and len(headers) == 8


def test_invalidate_forces_a_new_token() -> None:
    server = TokenServer(
        httpx.Response(200, json={"access_token": "first-token-1", "expires_in": 3600}),
        httpx.Response(200, json={"access_token": "second-token-2", "expires_in": 3600}),
    )
    creds = OAuthCredentials(oauth_profile(), http=httpx.Client(transport=httpx.MockTransport(server)))
    creds.auth_header()
    assert creds.invalidate() is True
    assert creds.auth_header() == {"Authorization": "Bearer second-token-2"}


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (httpx.Response(401, json={"error": "invalid_client"}), Unauthorized),
        (httpx.Response(503, text="busy"), ServerError),
        (httpx.Response(200, json={"token_type": "Bearer"}), ProtocolViolation),
        (httpx.Response(200, text="<html>"), ProtocolViolation),
    ],
)
def test_token_endpoint_failures_map_to_our_errors(response: httpx.Response, error: type[Exception]) -> None:
    creds = OAuthCredentials(oauth_profile(), http=httpx.Client(transport=httpx.MockTransport(lambda r: response)))
    with pytest.raises(error) as info:
        creds.auth_header()
    assert "csecret-123456" not in str(info.value)

