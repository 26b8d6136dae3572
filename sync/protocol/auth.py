"""Each profile's credential as an ``httpx.Auth``: what authorises a request to the sharing server.

A bearer token or basic credentials are one fixed header. The two OAuth types fetch an access
token from the profile's token endpoint on first use, cache it, renew it before it expires and,
after a 401 (a token revoked before its stated expiry), fetch a new one and send the request once
more. The token request is yielded from the auth flow, so it goes through the same client as the
API calls (TLS trust, timeouts, transport); a failing token endpoint maps to our errors like any
call. Every secret is registered with the redactor, and no ``repr`` shows one.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sharesync.sync.core.errors import ConfigError, ProtocolViolation, Unauthorized
from sharesync.sync.core.redact import register_secret
from sharesync.sync.protocol.http_errors import read_error, translate_httpx_errors
from sharesync.sync.protocol.profile import (
    BasicProfile,
    BearerTokenProfile,
    OAuthClientCredentialsProfile,
    OAuthJwtBearerProfile,
    Profile,
)

logger = logging.getLogger(__name__)

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"  # RFC 7523 §2.1
# The connector signs assertions valid for two minutes; so do we.
ASSERTION_SECONDS = 120

Flow = Generator[httpx.Request, httpx.Response, None]


class SharingAuth(httpx.Auth):
    """A profile's credential; :meth:`unauthorized_hint` words a 401 for the person who must fix it."""

    def unauthorized_hint(self) -> str:
        return ""


def auth_for(profile: Profile) -> SharingAuth:
    """The credential that sends ``profile``."""
    if isinstance(profile, BearerTokenProfile):
        return BearerTokenAuth(profile)
    if isinstance(profile, BasicProfile):
        return BasicProfileAuth(profile)
    if isinstance(profile, OAuthClientCredentialsProfile):
        return ClientCredentialsAuth(profile)
    return JwtBearerAuth(profile)


# ---------------------------------------------------------------- fixed headers


class BearerTokenAuth(SharingAuth):
    def __init__(self, profile: BearerTokenProfile) -> None:
        self._profile = profile
        token = profile.bearer_token.get_secret_value()
        register_secret(token)
        self._header = f"Bearer {token}"

    def __repr__(self) -> str:
        return f"BearerTokenAuth(endpoint={self._profile.endpoint!r})"

    def auth_flow(self, request: httpx.Request) -> Flow:
        request.headers["Authorization"] = self._header
        yield request

    def unauthorized_hint(self) -> str:
        expiry = self._profile.expiration_time
        if expiry is not None and self._profile.is_expired():
            return f"the profile's bearerToken expired at {expiry.isoformat()}; ask the provider for a new profile"
        return "check the profile's bearerToken"


class BasicProfileAuth(SharingAuth):
    def __init__(self, profile: BasicProfile) -> None:
        self._header = _basic(profile.username, profile.password.get_secret_value())

    def __repr__(self) -> str:
        return "BasicProfileAuth(***)"

    def auth_flow(self, request: httpx.Request) -> Flow:
        request.headers["Authorization"] = self._header
        yield request

    def unauthorized_hint(self) -> str:
        return "check the profile's username and password"


def _basic(user: str, password: str) -> str:
    register_secret(password)
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    register_secret(encoded)
    return f"Basic {encoded}"


# ---------------------------------------------------------------- access tokens


class _TokenResponse(BaseModel):
    """RFC 6749 §5.1; ``expires_in`` is sometimes sent as a string, so it is coerced."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    access_token: str = Field(min_length=1)
    expires_in: float | None = Field(default=None, gt=0)
    token_type: str = "Bearer"


class AccessTokenAuth(SharingAuth, ABC):
    """An access token from a token endpoint: fetched on first use, cached, renewed, refetched once on a 401.

    Renewal happens when less than ``min(renew_before, lifetime / 2)`` is left, so a short-lived
    token is not fetched per call. Concurrent requests share one fetch: the cache's lock is held
    while the token request is in flight, so this auth is for synchronous clients (the API client).
    """

    DEFAULT_LIFETIME = 3600.0

    def __init__(
        self, token_endpoint: str, *, renew_before: float = 300.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.token_endpoint = token_endpoint
        self._renew_before = renew_before
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._renew_at = 0.0

    @abstractmethod
    def token_request(self) -> httpx.Request:
        """The request that asks the token endpoint for a new access token."""

    def token_endpoint_hint(self) -> str:
        """Words for a refused token request."""
        return ""

    def sync_auth_flow(self, request: httpx.Request) -> Flow:
        # Delegated with ``yield from``: when httpx closes this flow (a failed token request), the
        # inner one is closed at once and releases the lock, not whenever it is garbage-collected.
        yield from self.auth_flow(request)

    def auth_flow(self, request: httpx.Request) -> Flow:
        token = yield from self._access_token(refused=None)
        request.headers["Authorization"] = f"Bearer {token}"
        response = yield request
        if response.status_code == Unauthorized.status:
            logger.info("%s: the access token was refused (401); fetching a new one and trying once more", request.url)
            token = yield from self._access_token(refused=token)
            request.headers["Authorization"] = f"Bearer {token}"
            yield request

    def _access_token(self, *, refused: str | None) -> Generator[httpx.Request, httpx.Response, str]:
        with self._lock:
            if self._token is not None and self._token != refused and self._clock() < self._renew_at:
                return self._token  # cached (or renewed by another request since ``refused`` was sent)
            response = yield self.token_request()
            token, lifetime = self._accept(response)
            self._token = token
            self._renew_at = self._clock() + lifetime - min(self._renew_before, lifetime / 2)
            return token

    def _accept(self, response: httpx.Response) -> tuple[str, float]:
        context = f"OAuth token endpoint {self.token_endpoint}"
        if not response.is_success:
            raise read_error(response, context=context, hint=self.token_endpoint_hint())
        with translate_httpx_errors(context):
            body = response.read()
        try:
            answer = _TokenResponse.model_validate_json(body)
        except ValidationError:
            raise ProtocolViolation(f"{context}: the answer holds no valid access_token/expires_in") from None
        register_secret(answer.access_token)
        lifetime = answer.expires_in or self.DEFAULT_LIFETIME
        logger.debug("%s: fetched an access token valid for %.0fs", context, lifetime)
        return answer.access_token, lifetime


class ClientCredentialsAuth(AccessTokenAuth):
    """``oauth_client_credentials`` (RFC 6749 §4.4): client id and secret by HTTP Basic, as the connector sends them."""

    def __init__(
        self,
        profile: OAuthClientCredentialsProfile,
        *,
        renew_before: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(profile.token_endpoint, renew_before=renew_before, clock=clock)
        self._profile = profile
        self._client_auth = _basic(profile.client_id, profile.client_secret.get_secret_value())

    def __repr__(self) -> str:
        return f"ClientCredentialsAuth(token_endpoint={self.token_endpoint!r}, client_id={self._profile.client_id!r})"

    def token_request(self) -> httpx.Request:
        form = {"grant_type": "client_credentials"}
        if self._profile.scope:
            form["scope"] = self._profile.scope
        headers = {"Accept": "application/json", "Authorization": self._client_auth}
        return httpx.Request("POST", self.token_endpoint, data=form, headers=headers)

    def token_endpoint_hint(self) -> str:
        return "check clientId, clientSecret and scope in the profile"

    def unauthorized_hint(self) -> str:
        return "the OAuth access token was refused; check the profile's clientId/clientSecret/scope"


class JwtBearerAuth(AccessTokenAuth):
    """``oauth_jwt_bearer_private_key_jwt``: a JWT signed with the profile's private key is the grant (RFC 7523).

    The assertion is the one the official connector (1.4.2) sends: header ``alg`` and ``kid``
    (``auth.privateKey.algorithm``/``keyId``); claims ``iss`` = ``auth.clientId``, ``aud`` =
    ``auth.issuer``, ``iat``, ``exp`` two minutes later, a random ``jti``, and ``scope`` /
    ``resource`` (= ``auth.audience``) when given. The key file is read once, here: a missing or
    unusable key is a ConfigError naming the file, never showing its content.
    """

    def __init__(
        self,
        profile: OAuthJwtBearerProfile,
        *,
        renew_before: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(profile.auth.token_endpoint, renew_before=renew_before, clock=clock)
        self._settings = profile.auth
        self._key = _signing_key(profile)

    def __repr__(self) -> str:
        return f"JwtBearerAuth(token_endpoint={self.token_endpoint!r}, client_id={self._settings.client_id!r})"

    def token_request(self) -> httpx.Request:
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": self.assertion()}
        return httpx.Request("POST", self.token_endpoint, data=form, headers={"Accept": "application/json"})

    def assertion(self, *, now: float | None = None) -> str:
        """A freshly signed JWT (registered as a secret: it is a credential while it is valid)."""
        import jwt  # here, not at the top: only this profile type signs anything

        settings, key = self._settings, self._settings.private_key
        issued = int(time.time() if now is None else now)
        claims: dict[str, str | int] = {
            "iss": settings.client_id,
            "aud": settings.issuer,
            "iat": issued,
            "exp": issued + ASSERTION_SECONDS,
            "jti": str(uuid.uuid4()),
        }
        if settings.scope:
            claims["scope"] = settings.scope
        if settings.audience:
            claims["resource"] = settings.audience  # the connector's name for the OAuth audience
        headers = {"kid": key.key_id} if key.key_id else None
        signed = jwt.encode(claims, self._key, algorithm=key.algorithm, headers=headers)
        register_secret(signed)
        return signed

    def token_endpoint_hint(self) -> str:
        return "check auth.clientId, auth.issuer and auth.privateKey (is this key registered with the provider?)"

    def unauthorized_hint(self) -> str:
        return "the OAuth access token was refused; check the profile's auth.clientId, auth.audience and auth.scope"


def _signing_key(profile: OAuthJwtBearerProfile) -> bytes:
    """The PEM private key of ``auth.privateKey.privateKeyFile``, checked by signing with it once."""
    import jwt

    key = profile.auth.private_key
    where = f"{profile.source}: auth.privateKey.privateKeyFile '{key.private_key_file}'"
    try:
        pem = key.private_key_file.expanduser().read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{where} not found; point it at the PEM private key registered with the provider") from None
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read ({exc.strerror})") from None
    text = pem.decode("ascii", errors="replace")
    register_secret(text.strip())
    for line in text.splitlines():  # a part of the key quoted anywhere is masked too
        if not line.startswith("-----"):
            register_secret(line.strip())
    try:
        jwt.encode({"check": True}, pem, algorithm=key.algorithm)
    except (jwt.PyJWTError, ValueError, TypeError, AttributeError):
        raise ConfigError(
            f"{where} does not hold a PEM private key for {key.algorithm}; check the file and auth.privateKey.algorithm"
        ) from None
    return pem
