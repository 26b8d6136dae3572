"""Credentials as httpx.Auth: access tokens fetched, cached, renewed and refetched once on a 401; JWT grants.

The token endpoint and the API are one ``httpx.MockTransport`` handler here: the token request
is yielded from the auth flow, so it goes through the very client that sends the API call.
(The same flows against real local HTTP servers: ``test_auth_over_http.py``.)
"""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from sharesync.sync.core.errors import BadRequest, ConfigError, ProtocolViolation, ServerError, Unauthorized
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.auth import ClientCredentialsAuth, JwtBearerAuth, auth_for
from sharesync.sync.protocol.profile import OAuthClientCredentialsProfile, OAuthJwtBearerProfile, parse_profile

API = "https://srv.example.com/ds/shares"


class Servers:
    """A token endpoint answering ``responses`` in turn (the last one forever), and an API that records
    the Authorization it got and refuses the tokens in ``refused``."""

    def __init__(self, *responses: httpx.Response, refused: tuple[str, ...] = ()) -> None:
        self.responses = list(responses)
        self.token_requests: list[httpx.Request] = []
        self.api_auth: list[str] = []
        self.refused = refused

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "idp.example.com":
            self.token_requests.append(request)
            return self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        self.api_auth.append(request.headers["Authorization"])
        if request.headers["Authorization"].removeprefix("Bearer ") in self.refused:
            return httpx.Response(401, json={"errorCode": "UNAUTHENTICATED", "message": "token revoked"})
        return httpx.Response(200, json={"items": []})

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self))


def token(value: str, expires_in: float | str = 3600) -> httpx.Response:
    return httpx.Response(200, json={"access_token": value, "expires_in": expires_in, "token_type": "Bearer"})


def oauth_profile() -> OAuthClientCredentialsProfile:
    profile = parse_profile(
        {
            "shareCredentialsVersion": 2,
            "type": "oauth_client_credentials",
            "endpoint": "https://srv.example.com",
            "tokenEndpoint": "https://idp.example.com/token",
            "clientId": "cid",
            "clientSecret": "csecret-123456",
            "scope": "sharing",
        }
    )
    assert isinstance(profile, OAuthClientCredentialsProfile)
    return profile


def test_oauth_token_is_fetched_once_cached_and_renewed_before_expiry() -> None:
    servers = Servers(token("access-one-123"), token("access-two-456", expires_in="3600"))
    now = [0.0]
    auth = ClientCredentialsAuth(oauth_profile(), clock=lambda: now[0])
    with servers.client() as http:
        http.get(API, auth=auth)
        now[0] = 3000.0
        http.get(API, auth=auth)  # still > 5 min left
        now[0] = 3301.0
        http.get(API, auth=auth)  # renewed 5 min early
    assert servers.api_auth == ["Bearer access-one-123", "Bearer access-one-123", "Bearer access-two-456"]
    assert len(servers.token_requests) == 2
    request = servers.token_requests[0]
    assert request.method == "POST" and str(request.url) == "https://idp.example.com/token"
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(b"cid:csecret-123456").decode()
    assert dict(httpx.QueryParams(request.content.decode())) == {"grant_type": "client_credentials", "scope": "sharing"}
    assert redact("access-one-123") == "***"  # fetched tokens are secrets too


def test_short_lived_tokens_are_renewed_at_half_life_not_on_every_call() -> None:
    servers = Servers(token("short-lived-1", expires_in=60))
    now = [0.0]
    auth = ClientCredentialsAuth(oauth_profile(), clock=lambda: now[0])
    with servers.client() as http:
        http.get(API, auth=auth)
        now[0] = 29.0
        http.get(API, auth=auth)
        assert len(servers.token_requests) == 1
        now[0] = 31.0
        http.get(API, auth=auth)
    assert len(servers.token_requests) == 2


def test_concurrent_callers_share_one_fetch() -> None:
    gate = threading.Event()
    servers = Servers(token("shared-token-1"))

    def slow(request: httpx.Request) -> httpx.Response:
        if request.url.host == "idp.example.com":
            gate.wait(5)
        return servers(request)

    auth = ClientCredentialsAuth(oauth_profile())
    statuses: list[int] = []
    with httpx.Client(transport=httpx.MockTransport(slow)) as http:
        threads = [
            threading.Thread(target=lambda: statuses.append(http.get(API, auth=auth).status_code)) for _ in range(8)
        ]
        for t in threads:
            t.start()
        gate.set()
        for t in threads:
            t.join()
    assert len(servers.token_requests) == 1 and statuses == [200] * 8
    assert servers.api_auth == ["Bearer shared-token-1"] * 8


def test_a_refused_token_is_fetched_again_and_the_request_sent_once_more() -> None:
    servers = Servers(token("first-token-1"), token("second-token-2"), refused=("first-token-1",))
    with servers.client() as http:
        assert http.get(API, auth=ClientCredentialsAuth(oauth_profile())).status_code == 200
    assert servers.api_auth == ["Bearer first-token-1", "Bearer second-token-2"]
    assert len(servers.token_requests) == 2


def test_a_401_is_retried_exactly_once() -> None:
    servers = Servers(
        token("revoked-1"), token("revoked-2"), token("revoked-3"), refused=("revoked-1", "revoked-2", "revoked-3")
    )
    with servers.client() as http:
        assert http.get(API, auth=ClientCredentialsAuth(oauth_profile())).status_code == 401
    assert servers.api_auth == ["Bearer revoked-1", "Bearer revoked-2"]
    assert len(servers.token_requests) == 2


def test_a_fixed_bearer_token_is_not_retried_on_a_401() -> None:
    servers = Servers(token("unused"), refused=("fixed-token-123",))
    profile = parse_profile(
        {"shareCredentialsVersion": 1, "endpoint": "https://srv.example.com", "bearerToken": "fixed-token-123"}
    )
    with servers.client() as http:
        assert http.get(API, auth=auth_for(profile)).status_code == 401
    assert servers.api_auth == ["Bearer fixed-token-123"] and servers.token_requests == []


@pytest.mark.timeout(10)
def test_a_token_request_that_breaks_does_not_block_the_next_call() -> None:
    servers = Servers(token("after-the-break-1"))
    broken = [True]

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "idp.example.com" and broken:
            broken.clear()  # the first token request only
            raise httpx.ConnectError("connection refused")
        return servers(request)

    auth = ClientCredentialsAuth(oauth_profile())
    with httpx.Client(transport=httpx.MockTransport(handler)) as http:
        with pytest.raises(httpx.ConnectError):
            http.get(API, auth=auth)
        assert http.get(API, auth=auth).status_code == 200  # the cache's lock was released
    assert servers.api_auth == ["Bearer after-the-break-1"]


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
    servers = Servers(response)
    with servers.client() as http, pytest.raises(error) as info:
        http.get(API, auth=ClientCredentialsAuth(oauth_profile()))
    assert "csecret-123456" not in str(info.value) and "OAuth token endpoint https://idp.example.com/token" in str(
        info.value
    )
    assert servers.api_auth == []


# ---------------------------------------------------------------- oauth_jwt_bearer_private_key_jwt


def write_key(tmp_path: Path, key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, name: str = "key.pem") -> Path:
    path = tmp_path / name
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return path


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def jwt_profile(key_file: Path, **key: Any) -> OAuthJwtBearerProfile:
    profile = parse_profile(
        {
            "shareCredentialsVersion": 2,
            "type": "oauth_jwt_bearer_private_key_jwt",
            "endpoint": "https://srv.example.com",
            "auth": {
                "tokenEndpoint": "https://idp.example.com/token",
                "issuer": "https://idp.example.com/",
                "clientId": "recipient-app",
                "audience": "https://srv.example.com",
                "scope": "sharing",
                "privateKey": {"privateKeyFile": str(key_file), "keyId": "key-1", **key},
            },
        },
        source="jwt.share",
    )
    assert isinstance(profile, OAuthJwtBearerProfile)
    return profile


def test_the_jwt_grant_is_the_connectors(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    servers = Servers(token("jwt-access-token-1"))
    with servers.client() as http:
        http.get(API, auth=auth_for(jwt_profile(write_key(tmp_path, rsa_key))))
    assert servers.api_auth == ["Bearer jwt-access-token-1"]
    (request,) = servers.token_requests
    form = dict(httpx.QueryParams(request.content.decode()))
    assert form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" and set(form) == {
        "grant_type",
        "assertion",
    }
    assert "Authorization" not in request.headers
    assertion = form["assertion"]
    assert jwt.get_unverified_header(assertion) == {"alg": "RS256", "kid": "key-1", "typ": "JWT"}
    claims = jwt.decode(assertion, rsa_key.public_key(), algorithms=["RS256"], audience="https://idp.example.com/")
    assert claims["iss"] == "recipient-app" and claims["scope"] == "sharing"
    assert claims["resource"] == "https://srv.example.com" and claims["exp"] - claims["iat"] == 120
    assert claims["jti"] and redact(assertion) == "***"


def test_each_assertion_is_new(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    auth = JwtBearerAuth(jwt_profile(write_key(tmp_path, rsa_key)))
    first, second = auth.assertion(now=1_700_000_000), auth.assertion(now=1_700_000_000)
    assert first != second  # a fresh jti each time: a replayed assertion is refused by the endpoint


def test_ec_keys_sign_with_es256(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    auth = JwtBearerAuth(jwt_profile(write_key(tmp_path, key), algorithm="ES256"))
    signed = auth.assertion()
    claims = jwt.decode(signed, key.public_key(), algorithms=["ES256"], audience="https://idp.example.com/")
    assert claims["iss"] == "recipient-app"


def test_a_missing_key_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"jwt.share: auth.privateKey.privateKeyFile '.*nope.pem' not found"):
        auth_for(jwt_profile(tmp_path / "nope.pem"))


@pytest.mark.parametrize("case", ["not a key", "public key", "wrong algorithm"])
def test_an_unusable_key_is_a_config_error_that_never_shows_it(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, case: str
) -> None:
    path = write_key(tmp_path, rsa_key)
    pem = path.read_text()
    options: dict[str, Any] = {}
    if case == "not a key":
        path.write_text(pem.replace("PRIVATE KEY-----\n", "PRIVATE KEY-----\nbroken", 1))
    elif case == "public key":
        path.write_bytes(
            rsa_key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    else:
        options["algorithm"] = "ES256"
    with pytest.raises(ConfigError, match=r"does not hold a PEM private key for (RS|ES)256") as info:
        auth_for(jwt_profile(path, **options))
    body = [line for line in path.read_text().splitlines() if not line.startswith("-----")]
    assert not any(line in str(info.value) for line in body)


def test_the_private_key_never_shows(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    path = write_key(tmp_path, rsa_key)
    profile = jwt_profile(path)
    auth = auth_for(profile)
    pem = path.read_text()
    lines = [line for line in pem.splitlines() if not line.startswith("-----")]
    texts = [repr(auth), str(auth), repr(profile), str(profile), redact(f"leaked: {pem}"), redact(lines[3])]
    assert not any(line in text for line in lines for text in texts)


def test_a_token_endpoint_refusing_the_assertion_says_what_to_check(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    servers = Servers(httpx.Response(400, json={"error": "invalid_grant", "error_description": "bad signature"}))
    auth = auth_for(jwt_profile(write_key(tmp_path, rsa_key)))
    with servers.client() as http, pytest.raises(BadRequest, match=r"auth.privateKey \(is this key registered"):
        http.get(API, auth=auth)
