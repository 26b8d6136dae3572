"""Credentials over real HTTP on loopback: redirects never carry them to another origin; a JWT profile
signs in at a token endpoint that verifies the assertion, then reads from the local sharing server."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from support.faults import SharingServer

from sharesync.sync.core.errors import TransportError, Unauthorized
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile, parse_profile
from sharesync.sync.protocol.retry import RetryPolicy

from .loopback import Loopback, Reply, Seen

pytestmark = pytest.mark.timeout(60)

FAST = RetryPolicy(max_attempts=2, total_seconds=5.0, initial_backoff=0.01, max_backoff=0.02)
TOKEN = "loopback-bearer-token-5a1f"
ACCESS = "loopback-access-token-77c2"
PASSWORD = "loopback-password-93e1"
SECRET = "loopback-client-secret-4b0d"


def profile_for(kind: str, origin: str, endpoint: str) -> dict[str, Any]:
    if kind == "bearer":
        return {"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": TOKEN}
    if kind == "basic":
        return {
            "shareCredentialsVersion": 2,
            "type": "basic",
            "endpoint": endpoint,
            "username": "u",
            "password": PASSWORD,
        }
    return {
        "shareCredentialsVersion": 2,
        "type": "oauth_client_credentials",
        "endpoint": endpoint,
        "tokenEndpoint": f"{origin}/token",
        "clientId": "c",
        "clientSecret": SECRET,
    }


@pytest.mark.parametrize("kind", ["bearer", "basic", "oauth"])
def test_a_redirect_to_another_origin_never_carries_the_credential(kind: str) -> None:
    with Loopback(lambda seen: Reply(body={"items": [{"name": "elsewhere"}]})) as other:

        def origin_answers(seen: Seen) -> Reply:
            if seen.path == "/token":
                return Reply(body={"access_token": ACCESS, "expires_in": 3600})
            return Reply(307, headers={"Location": f"{other.url}{seen.path}"})

        with Loopback(origin_answers) as origin:
            profile = parse_profile(profile_for(kind, origin.url, f"{origin.url}/ds"))
            with SharingClient(profile, retry=FAST) as client:
                assert [s.name for s in client.list_shares()] == ["elsewhere"]  # the redirect was followed

    api_calls = [s for s in origin.seen if s.path != "/token"]
    assert len(api_calls) == 1 and api_calls[0].headers["Authorization"].split()[0] in ("Bearer", "Basic")
    assert [s.path for s in other.seen] == ["/ds/shares"]
    assert {name.lower() for name in other.seen[0].headers} & {"authorization", "cookie"} == set()
    everything = json.dumps([(s.path, s.headers, s.body.decode()) for s in other.seen])
    assert not any(secret in everything for secret in (TOKEN, ACCESS, PASSWORD, SECRET, "Basic ", "Bearer "))


def test_a_same_origin_redirect_keeps_working() -> None:
    def answers(seen: Seen) -> Reply:
        if seen.path.startswith("/old/"):
            return Reply(308, headers={"Location": seen.path.replace("/old/", "/ds/", 1)})
        if seen.headers.get("Authorization") != f"Bearer {TOKEN}":
            return Reply(401, {"errorCode": "UNAUTHENTICATED", "message": "no token"})
        return Reply(body={"items": [{"name": "moved"}]})

    with Loopback(answers) as origin:
        profile = parse_profile(profile_for("bearer", origin.url, f"{origin.url}/old"))
        with SharingClient(profile, retry=FAST) as client:
            assert [s.name for s in client.list_shares(max_results=5)] == ["moved"]
    assert [s.path for s in origin.seen] == ["/old/shares?maxResults=5", "/ds/shares?maxResults=5"]
    assert all(s.headers["Authorization"] == f"Bearer {TOKEN}" for s in origin.seen)


# ---------------------------------------------------------------- oauth_jwt_bearer_private_key_jwt

ISSUER = "https://idp.loopback.test/"
CLIENT_ID = "recipient-app"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class TokenEndpoint:
    """Verifies each assertion with the public key as an identity provider would, then issues ``tokens`` in turn."""

    def __init__(self, public_key: rsa.RSAPublicKey, *tokens: str) -> None:
        self.public_key = public_key
        self.tokens = list(tokens)
        self.jtis: list[str] = []

    def __call__(self, seen: Seen) -> Reply:
        form = {key: values[0] for key, values in parse_qs(seen.body.decode()).items()}
        if seen.method != "POST" or form.get("grant_type") != JWT_GRANT:
            return Reply(400, {"error": "unsupported_grant_type"})
        try:
            claims = jwt.decode(
                form["assertion"],
                self.public_key,
                algorithms=["RS256"],
                audience=ISSUER,
                issuer=CLIENT_ID,
                options={"require": ["exp", "iat", "jti"]},
            )
        except jwt.PyJWTError as exc:
            return Reply(401, {"error": "invalid_client", "error_description": str(exc)})
        if jwt.get_unverified_header(form["assertion"]).get("kid") != "key-1" or claims["jti"] in self.jtis:
            return Reply(401, {"error": "invalid_client", "error_description": "unknown key or replayed assertion"})
        self.jtis.append(claims["jti"])
        token = self.tokens.pop(0) if len(self.tokens) > 1 else self.tokens[0]
        return Reply(body={"access_token": token, "expires_in": 3600, "token_type": "Bearer"})


@pytest.fixture(scope="module")
def key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def write_jwt_profile(tmp_path: Path, key: rsa.RSAPrivateKey, token_endpoint: str, endpoint: str) -> Path:
    pem = tmp_path / "recipient.pem"
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    profile = {
        "shareCredentialsVersion": 2,
        "type": "oauth_jwt_bearer_private_key_jwt",
        "endpoint": endpoint,
        "auth": {
            "tokenEndpoint": token_endpoint,
            "issuer": ISSUER,
            "clientId": CLIENT_ID,
            "audience": endpoint,
            "privateKey": {"privateKeyFile": str(pem), "keyId": "key-1"},
        },
    }
    path = tmp_path / "jwt.share"
    path.write_text(json.dumps(profile))
    return path


def test_a_jwt_profile_reads_from_the_sharing_server(
    sharing_server: SharingServer, key: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    # The first access token is one the sharing server refuses: the client signs a new assertion and retries once.
    endpoint = TokenEndpoint(key.public_key(), "revoked-access-token-1", sharing_server.token)
    with Loopback(endpoint) as idp:
        profile = load_profile(write_jwt_profile(tmp_path, key, f"{idp.url}/oauth2/token", sharing_server.endpoint))
        with SharingClient(profile, retry=FAST) as client:
            assert {"demo", "samples"} <= {s.name for s in client.list_shares()}
            assert client.metadata("demo.sales.orders").version >= 0  # the cached token serves the next calls
    assert [s.path for s in idp.seen] == ["/oauth2/token", "/oauth2/token"] and len(set(endpoint.jtis)) == 2


def test_a_key_the_provider_does_not_know_is_refused_with_a_hint(
    sharing_server: SharingServer, key: rsa.RSAPrivateKey, tmp_path: Path
) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with Loopback(TokenEndpoint(other.public_key(), sharing_server.token)) as idp:
        profile = load_profile(write_jwt_profile(tmp_path, key, f"{idp.url}/token", sharing_server.endpoint))
        with SharingClient(profile, retry=FAST) as client, pytest.raises(Unauthorized) as info:
            client.list_shares()
    message = str(info.value)
    assert message.startswith(f"OAuth token endpoint {idp.url}/token: HTTP 401 invalid_client: Signature verification")
    assert "is this key registered with the provider" in message
    assert "PRIVATE KEY" not in message


def test_an_unreachable_token_endpoint_is_named(
    sharing_server: SharingServer, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/token"
    profile = parse_profile({**sharing_server.profile(oauth=True), "tokenEndpoint": closed})
    with SharingClient(profile, retry=FAST) as client, pytest.raises(TransportError) as info:
        client.list_shares()
    assert str(info.value).startswith(f"list shares (calling {closed}): connection refused (")
    # The retry notice names the provider and, since it is not the provider's endpoint, the token endpoint.
    notice = f"the provider ({sharing_server.base_url}): connection refused at {closed.removesuffix('/token')}; retry 2"
    assert notice in caplog.text, caplog.text
