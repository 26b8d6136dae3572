"""Profile files: every version and type, valid and broken; expiry; secrets kept out of reprs."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.auth import auth_for
from sharesync.sync.protocol.profile import (
    BasicProfile,
    BearerTokenProfile,
    OAuthClientCredentialsProfile,
    OAuthJwtBearerProfile,
    load_profile,
    parse_profile,
    write_profile_file,
)

from .conftest import FIXTURES

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def write(tmp_path: Path, content: Any, name: str = "p.share") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    path.chmod(0o600)  # as a profile should be: one readable by others is warned about
    return path


def sent_authorization(auth: httpx.Auth) -> str:
    """The Authorization header a fixed credential puts on a request."""
    return next(auth.sync_auth_flow(httpx.Request("GET", "https://srv.example.com/shares"))).headers["Authorization"]


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
    assert sent_authorization(auth_for(profile)) == "Bearer tok-v1-abcdef"
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
    header = sent_authorization(auth_for(profile))
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
    for text in (repr(profile), str(profile), repr(bearer), repr(auth_for(bearer)), repr(auth_for(profile))):
        assert "oauth-secret-value" not in text and "bearer-secret-value" not in text
    assert redact("x oauth-secret-value y bearer-secret-value") == "x *** y ***"


def test_a_secret_in_a_broken_profile_is_still_registered() -> None:
    with pytest.raises(ConfigError):
        parse_profile({"shareCredentialsVersion": 1, "endpoint": "nope", "bearerToken": "leaky-token-987"})
    assert redact("leaky-token-987") == "***"


# ---------------------------------------------------------------- oauth_jwt_bearer_private_key_jwt


def jwt_profile(**auth: Any) -> dict[str, Any]:
    """The connector 1.4.2's layout: everything but the endpoint nested under ``auth``."""
    settings = {"tokenEndpoint": "https://idp.example.com/token", "issuer": "https://idp.example.com",
                "clientId": "recipient-app", "audience": "https://sharing.example.com", "scope": "sharing",
                "privateKey": {"privateKeyFile": "/keys/recipient.pem", "keyId": "key-1", "algorithm": "RS256"},
                **auth}
    return {"shareCredentialsVersion": 2, "type": "oauth_jwt_bearer_private_key_jwt",
            "endpoint": "https://srv.example.com/ds", "auth": settings}


def test_v2_oauth_jwt_bearer(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, jwt_profile()))
    assert isinstance(profile, OAuthJwtBearerProfile)
    settings = profile.auth
    assert (settings.token_endpoint, settings.issuer, settings.client_id, settings.audience, settings.scope) == (
        "https://idp.example.com/token", "https://idp.example.com", "recipient-app", "https://sharing.example.com",
        "sharing")
    key = settings.private_key
    assert (key.private_key_file, key.key_id, key.algorithm) == (Path("/keys/recipient.pem"), "key-1", "RS256")
    assert not profile.expires_within(1)


def test_jwt_defaults_follow_the_connector(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, jwt_profile(audience=None, scope=None,
                                                       privateKey={"privateKeyFile": "k.pem"})))
    assert isinstance(profile, OAuthJwtBearerProfile)
    assert profile.auth.private_key.algorithm == "RS256" and profile.auth.private_key.key_id is None


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        ({"issuer": None}, r"field 'auth.issuer' Input should be a valid string"),
        ({"privateKey": {"keyId": "k"}}, r"field 'auth.privateKey.privateKeyFile' is missing"),
        ({"privateKey": {"privateKeyFile": "k.pem", "algorithm": "HS256"}}, r"field 'auth.privateKey.algorithm' .*'RS256'"),
        ({"tokenEndpoint": "idp.example.com/token"}, r"field 'auth.tokenEndpoint' must be an http\(s\) URL"),
    ],
)
def test_broken_jwt_profiles_name_the_nested_field(tmp_path: Path, auth: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_profile(write(tmp_path, jwt_profile(**auth)))


def test_a_jwt_profile_without_its_auth_object_says_so(tmp_path: Path) -> None:
    raw = jwt_profile()
    del raw["auth"]
    with pytest.raises(ConfigError, match=r"field 'auth' is missing"):
        load_profile(write(tmp_path, raw))


def test_a_profile_readable_by_others_is_warned_about_once_naming_the_file_and_the_fix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """As ssh warns about a private key others can read; once per file, not every pass of ``sync --every``."""
    path = write(tmp_path, v1())
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="sharesync.sync.protocol.profile"):
        load_profile(path)
        load_profile(path)
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        f"profile file '{path}' is readable by other users (mode 0644) and holds a secret; run 'chmod 600 {path}'"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sharesync.sync.protocol.profile"):
        load_profile(write(tmp_path, v1(), name="private.share"))  # 0600: nothing to say
    assert not caplog.records


def test_a_written_profile_is_private_from_the_start_even_over_a_readable_one(tmp_path: Path) -> None:
    """Created 0600 and renamed into place: opening an existing 0644 file would keep its mode."""
    path = tmp_path / "out.share"
    path.write_text("{}")
    path.chmod(0o644)

    assert write_profile_file(path, v1()) == path

    assert path.stat().st_mode & 0o777 == 0o600
    assert json.loads(path.read_text())["bearerToken"] == v1()["bearerToken"]
    assert [p.name for p in tmp_path.iterdir()] == ["out.share"]  # no temporary file left behind
