"""Profile file → validated profile → credentials behind one ``auth_header()``.

The profile is the provider's JSON file (spec "Profile File Format"). Version 1 holds a bearer
token; version 2 adds a ``type``: ``bearer_token``, ``oauth_client_credentials`` (a token
endpoint, client id and secret: the access token is fetched, cached and renewed before it
expires) or ``basic``. A wrong profile fails at load with the file, the field and the fix;
an expired bearer token refuses to start, one expiring within a week logs a warning.
Secrets are ``SecretStr`` (never in a ``repr``) and registered with the redactor on load.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel

from sharesync.sync.core.errors import ConfigError, ProtocolViolation
from sharesync.sync.core.redact import register_secret
from sharesync.sync.core.timestamps import parse_timestamp

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = (1, 2)
EXPIRY_WARNING_DAYS = 7


class Credentials(Protocol):
    """What the transport needs from a profile: a header per request."""

    def auth_header(self) -> dict[str, str]:
        """The ``Authorization`` header (fetching or renewing a token first if needed)."""
        ...

    def invalidate(self) -> bool:
        """Forget a cached token after a 401; True if a retry could use a different one."""
        ...

    def unauthorized_hint(self) -> str:
        """Extra words for a 401 message (e.g. "the token expired at …")."""
        ...


# ---------------------------------------------------------------- profile models


class _ProfileBase(BaseModel):
    # Unknown fields are ignored: providers add fields within a shareCredentialsVersion.
    # Built on first use (defer_build): a run validates one profile type, not all three.
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="ignore", defer_build=True
    )

    share_credentials_version: int
    endpoint: str
    source: str = Field(default="profile", exclude=True, repr=False)

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip()
        if not value.startswith(("https://", "http://")):
            raise ValueError(f"must be an http(s) URL, not '{value}'; copy the endpoint from the provider's profile")
        return value.rstrip("/")

    @property
    def expiration_time(self) -> datetime | None:
        return None

    def expires_within(self, days: float, *, now: datetime | None = None) -> bool:
        """True if the credentials expire (or have expired) within ``days``; False if they never do."""
        expiry = self.expiration_time
        if expiry is None:
            return False
        return expiry <= (now or datetime.now(UTC)) + timedelta(days=days)

    def is_expired(self, *, now: datetime | None = None) -> bool:
        return self.expires_within(0, now=now)


class BearerTokenProfile(_ProfileBase):
    """Version 1, or version 2 with ``type: bearer_token``."""

    type: Literal["bearer_token"] = "bearer_token"
    bearer_token: SecretStr
    expiration_time_: datetime | None = Field(default=None, alias="expirationTime")

    @field_validator("bearer_token")
    @classmethod
    def _not_blank(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("must not be empty; copy the token from the provider's profile")
        return value

    @field_validator("expiration_time_", mode="before")
    @classmethod
    def _timestamp(cls, value: Any) -> datetime | None:
        if value in (None, ""):
            return None
        try:
            return parse_timestamp(value)
        except ValueError:
            raise ValueError(f"must be an ISO-8601 timestamp like '2025-01-01T00:00:00Z', not {value!r}") from None

    @property
    def expiration_time(self) -> datetime | None:
        return self.expiration_time_

    def credentials(self, http: httpx.Client | None = None) -> Credentials:
        return BearerCredentials(self)


class OAuthClientCredentialsProfile(_ProfileBase):
    """Version 2, ``type: oauth_client_credentials`` (RFC 6749 §4.4)."""

    type: Literal["oauth_client_credentials"]
    token_endpoint: str
    client_id: str
    client_secret: SecretStr
    scope: str | None = None

    @field_validator("token_endpoint")
    @classmethod
    def _token_url(cls, value: str) -> str:
        if not value.strip().startswith(("https://", "http://")):
            raise ValueError(f"must be an http(s) URL, not '{value}'")
        return value.strip()

    def credentials(self, http: httpx.Client | None = None) -> Credentials:
        return OAuthCredentials(self, http=http)


class BasicProfile(_ProfileBase):
    """Version 2, ``type: basic`` (HTTP Basic authentication)."""

    type: Literal["basic"]
    username: str
    password: SecretStr

    def credentials(self, http: httpx.Client | None = None) -> Credentials:
        return BasicCredentials(self)


Profile = BearerTokenProfile | OAuthClientCredentialsProfile | BasicProfile
_TYPES: dict[str, type[Profile]] = {
    "bearer_token": BearerTokenProfile,
    "oauth_client_credentials": OAuthClientCredentialsProfile,
    "basic": BasicProfile,
}


# ---------------------------------------------------------------- loading


def load_profile(
    path: str | Path,
    *,
    allow_expired: bool = False,
    now: datetime | None = None,
) -> Profile:
    """Read and validate a profile file; refuse an expired token unless ``allow_expired``."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"profile file '{file}' not found; download the profile (.share file) from the provider "
            "and point 'profile' in the config at it"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read profile file '{file}': {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"profile file '{file}' is not valid JSON ({exc.msg} at line {exc.lineno}); "
            "re-download it from the provider"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"profile file '{file}' must be a JSON object with shareCredentialsVersion and endpoint")
    profile = parse_profile(raw, source=str(file))
    check_expiry(profile, allow_expired=allow_expired, now=now)
    return profile


def parse_profile(raw: dict[str, Any], *, source: str = "profile") -> Profile:
    """Validate a profile mapping and register its secrets with the redactor."""
    # Register secrets first: even a profile that fails validation must not leak them.
    for key in ("bearerToken", "clientSecret", "password"):
        if isinstance(raw.get(key), str):
            register_secret(raw[key])
    version = raw.get("shareCredentialsVersion")
    if version is None:
        raise ConfigError(f"{source}: shareCredentialsVersion: required field is missing (1 or 2)")
    if isinstance(version, bool) or not isinstance(version, int) or version not in SUPPORTED_VERSIONS:
        newer = isinstance(version, int) and not isinstance(version, bool) and version > max(SUPPORTED_VERSIONS)
        fix = "upgrade sharesync" if newer else "use 1 or 2"
        raise ConfigError(
            f"{source}: shareCredentialsVersion: {version!r} is not supported (supported: 1, 2); {fix}"
        )
    data = {**raw, "source": source}
    try:
        if version == 1:
            data.pop("type", None)
            return BearerTokenProfile.model_validate(data)
        kind = raw.get("type")
        if kind not in _TYPES:
            known = ", ".join(_TYPES)
            raise ConfigError(f"{source}: type: {kind!r} is not supported for shareCredentialsVersion 2 (supported: {known})")
        return _TYPES[kind].model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_describe(exc)} (compare with the profile file the provider sent)") from None


def _describe(exc: ValidationError) -> str:
    """``field 'bearerToken' is missing``: worded so the redactor's ``key: value`` rule leaves it alone."""
    problems = []
    for error in exc.errors(include_url=False):
        path = ".".join(str(part) for part in error["loc"])
        if error["type"] == "missing":
            problems.append(f"field '{path}' is missing")
        else:
            problems.append(f"field '{path}' {error['msg'].removeprefix('Value error, ')}")
    return "; ".join(problems)


def check_expiry(profile: Profile, *, allow_expired: bool = False, now: datetime | None = None) -> None:
    """Refuse an expired bearer token; warn when it expires within a week."""
    expiry = profile.expiration_time
    if expiry is None:
        return
    if profile.is_expired(now=now) and not allow_expired:
        raise ConfigError(
            f"{profile.source}: the profile's bearerToken expired at {expiry.isoformat()}; ask the provider for a new profile"
        )
    if profile.expires_within(EXPIRY_WARNING_DAYS, now=now):
        logger.warning(
            "%s: the profile's bearerToken expires at %s; ask the provider for a new profile soon", profile.source, expiry.isoformat()
        )


# ---------------------------------------------------------------- credentials


class BearerCredentials:
    def __init__(self, profile: BearerTokenProfile) -> None:
        self._profile = profile
        register_secret(profile.bearer_token.get_secret_value())

    def __repr__(self) -> str:
        return f"BearerCredentials(endpoint={self._profile.endpoint!r})"

    def auth_header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._profile.bearer_token.get_secret_value()}"}

    def invalidate(self) -> bool:
        return False

    def unauthorized_hint(self) -> str:
        expiry = self._profile.expiration_time
        if expiry is not None and self._profile.is_expired():
            return f"the profile's bearerToken expired at {expiry.isoformat()}; ask the provider for a new profile"
        return "check the profile's bearerToken"


class BasicCredentials:
    def __init__(self, profile: BasicProfile) -> None:
        pair = f"{profile.username}:{profile.password.get_secret_value()}".encode()
        self._value = "Basic " + base64.b64encode(pair).decode("ascii")
        register_secret(profile.password.get_secret_value())
        register_secret(self._value.removeprefix("Basic "))

    def __repr__(self) -> str:
        return "BasicCredentials(***)"

    def auth_header(self) -> dict[str, str]:
        return {"Authorization": self._value}

    def invalidate(self) -> bool:
        return False

    def unauthorized_hint(self) -> str:
        return "check the profile's username and password"


class _TokenResponse(BaseModel):
    """RFC 6749 §5.1; ``expires_in`` is sometimes sent as a string, so it is coerced."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    access_token: str = Field(min_length=1)
    expires_in: float | None = Field(default=None, gt=0)
    token_type: str = "Bearer"


class OAuthCredentials:
    """Client-credentials access token: fetched on first use, cached, renewed before expiry.

    Thread-safe: concurrent requests share one fetch. Renewal happens when less than
    ``min(renew_before, lifetime / 2)`` is left, so a short-lived token is not fetched per call.
    """

    DEFAULT_LIFETIME = 3600.0

    def __init__(
        self,
        profile: OAuthClientCredentialsProfile,
        *,
        http: httpx.Client | None = None,
        renew_before: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._profile = profile
        self._http = http
        self._renew_before = renew_before
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._renew_at = 0.0
        self.fetches = 0
        register_secret(profile.client_secret.get_secret_value())

    def __repr__(self) -> str:
        return f"OAuthCredentials(token_endpoint={self._profile.token_endpoint!r}, client_id={self._profile.client_id!r})"

    def auth_header(self) -> dict[str, str]:
        with self._lock:
            if self._token is None or self._clock() >= self._renew_at:
                self._fetch()
            assert self._token is not None
            return {"Authorization": f"Bearer {self._token}"}

    def invalidate(self) -> bool:
        with self._lock:
            self._token = None
        return True

    def unauthorized_hint(self) -> str:
        return "the OAuth access token was refused; check the profile's clientId/clientSecret/scope"

    def _fetch(self) -> None:
        from sharesync.sync.protocol.transport import build_http_client, read_error, translate_httpx_errors

        context = f"OAuth token endpoint {self._profile.token_endpoint}"
        form = {"grant_type": "client_credentials"}
        if self._profile.scope:
            form["scope"] = self._profile.scope
        auth = httpx.BasicAuth(self._profile.client_id, self._profile.client_secret.get_secret_value())
        http = self._http or build_http_client()
        try:
            with translate_httpx_errors(context):
                response = http.post(
                    self._profile.token_endpoint, data=form, auth=auth, headers={"Accept": "application/json"}
                )
            if not response.is_success:
                raise read_error(response, context=context, hint="check clientId, clientSecret and scope in the profile")
            try:
                token = _TokenResponse.model_validate_json(response.content)
            except ValidationError:
                raise ProtocolViolation(f"{context}: the answer holds no valid access_token/expires_in") from None
        finally:
            if self._http is None:
                http.close()
        register_secret(token.access_token)
        lifetime = token.expires_in or self.DEFAULT_LIFETIME
        self._token = token.access_token
        self._renew_at = self._clock() + lifetime - min(self._renew_before, lifetime / 2)
        self.fetches += 1
        logger.debug("%s: fetched an access token valid for %.0fs", context, lifetime)
