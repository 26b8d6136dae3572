"""Profile file → validated, immutable profile: data only, no HTTP.

The profile is the provider's JSON file (Delta Sharing protocol, "Profile File Format").
Version 1 holds a bearer token; version 2 adds a ``type``: ``bearer_token``,
``oauth_client_credentials`` (token endpoint, client id and secret), ``basic``, and
``oauth_jwt_bearer_private_key_jwt`` (the official connector's type since 1.4: a private key
file whose signed JWT is exchanged at a token endpoint, fields nested under ``auth``). A wrong
profile fails at load with the file, the field and the fix; an expired bearer token refuses to
start, one expiring within a week logs a warning. Secrets are ``SecretStr`` (never in a
``repr``) and registered with the redactor on load. :mod:`sharesync.sync.protocol.auth` turns a
profile into the ``httpx.Auth`` that sends it.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic.alias_generators import to_camel

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.redact import register_secret
from sharesync.sync.core.timestamps import parse_timestamp

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = (1, 2)
EXPIRY_WARNING_DAYS = 7


# ---------------------------------------------------------------- profile models


class _ProfileModel(BaseModel):
    # Unknown fields are ignored: providers add fields within a shareCredentialsVersion.
    # Built on first use (defer_build): a run validates one profile type, not all of them.
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="ignore", defer_build=True
    )


def _http_url(value: str) -> str:
    value = value.strip()
    if not value.startswith(("https://", "http://")):
        raise ValueError(f"must be an http(s) URL, not '{value}'")
    return value


class _ProfileBase(_ProfileModel):
    """What every profile type has: a version, the sharing server's endpoint, and where it was read."""

    share_credentials_version: int
    endpoint: str
    source: str = Field(default="profile", exclude=True, repr=False)

    @field_validator("endpoint")
    @classmethod
    def _endpoint_url(cls, value: str) -> str:
        try:
            return _http_url(value).rstrip("/")
        except ValueError as exc:
            raise ValueError(f"{exc}; copy the endpoint from the provider's profile") from None

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


class OAuthClientCredentialsProfile(_ProfileBase):
    """Version 2, ``type: oauth_client_credentials`` (RFC 6749 §4.4)."""

    type: Literal["oauth_client_credentials"]
    token_endpoint: str
    client_id: str
    client_secret: SecretStr
    scope: str | None = None

    _token_url = field_validator("token_endpoint")(_http_url)


class BasicProfile(_ProfileBase):
    """Version 2, ``type: basic`` (HTTP Basic authentication)."""

    type: Literal["basic"]
    username: str
    password: SecretStr


# The algorithms PyJWT signs with an asymmetric private key.
JwtAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


class PrivateKeySettings(_ProfileModel):
    """``auth.privateKey``: where the PEM private key is (a relative path is from the working directory,
    as the connector reads it), its key id and signing algorithm."""

    private_key_file: Path
    key_id: str | None = None
    algorithm: JwtAlgorithm = "RS256"


class JwtBearerSettings(_ProfileModel):
    """``auth`` of an ``oauth_jwt_bearer_private_key_jwt`` profile (field names as the connector 1.4.2 reads them)."""

    token_endpoint: str
    issuer: str
    client_id: str
    audience: str | None = None
    scope: str | None = None
    private_key: PrivateKeySettings

    _token_url = field_validator("token_endpoint")(_http_url)


class OAuthJwtBearerProfile(_ProfileBase):
    """Version 2, ``type: oauth_jwt_bearer_private_key_jwt`` (RFC 7523 JWT bearer grant)."""

    type: Literal["oauth_jwt_bearer_private_key_jwt"]
    auth: JwtBearerSettings


Profile = BearerTokenProfile | OAuthClientCredentialsProfile | BasicProfile | OAuthJwtBearerProfile
_TYPES: dict[str, type[Profile]] = {
    "bearer_token": BearerTokenProfile,
    "oauth_client_credentials": OAuthClientCredentialsProfile,
    "basic": BasicProfile,
    "oauth_jwt_bearer_private_key_jwt": OAuthJwtBearerProfile,
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
    _check_private(file)  # after the checks: a profile refused is said in one line, without this warning
    return profile


def write_profile_file(path: str | Path, raw: dict[str, Any]) -> Path:
    """Write a profile (it holds a secret) readable by its owner alone: created mode 0600 under a
    temporary name (``mkstemp``'s mode) and renamed into place, so no moment exists at which
    another user could read it — as a ``chmod`` after writing would leave."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".tmp", dir=file.parent)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            out.write(json.dumps(raw, indent=2) + "\n")
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return file


def _check_private(file: Path) -> None:
    """Warn when other users may read the profile's secret (as ssh does for a private key)."""
    if os.name != "posix":
        return
    try:
        mode = stat.S_IMODE(file.stat().st_mode)
    except OSError:
        return
    if mode & 0o077:
        _warn_readable(str(file), mode)


@cache  # once per file and mode in a process: ``sync --every`` reads the profile every pass
def _warn_readable(file: str, mode: int) -> None:
    logger.warning(
        "profile file '%s' is readable by other users (mode %04o) and holds a secret; run 'chmod 600 %s'",
        file,
        mode,
        file,
    )


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
        raise ConfigError(f"{source}: shareCredentialsVersion: {version!r} is not supported (supported: 1, 2); {fix}")
    data = {**raw, "source": source}
    try:
        if version == 1:
            data.pop("type", None)
            return BearerTokenProfile.model_validate(data)
        kind = raw.get("type")
        if kind not in _TYPES:
            known = ", ".join(_TYPES)
            raise ConfigError(
                f"{source}: type: {kind!r} is not supported for shareCredentialsVersion 2 (supported: {known})"
            )
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


def check_expiry(
    profile: Profile, *, allow_expired: bool = False, now: datetime | None = None, provider: str | None = None
) -> None:
    """Refuse an expired bearer token; warn when it expires within a week (naming the
    ``provider`` of a config with several, whose tables alone it concerns)."""
    expiry = profile.expiration_time
    if expiry is None:
        return
    whose = f"provider '{provider}' ({profile.source})" if provider else str(profile.source)
    if profile.is_expired(now=now) and not allow_expired:
        raise ConfigError(
            f"{whose}: the profile's bearerToken expired at {expiry.isoformat()}; ask the provider for a new profile"
        )
    if profile.expires_within(EXPIRY_WARNING_DAYS, now=now):
        logger.warning(
            "%s: the profile's bearerToken expires at %s; ask the provider for a new profile soon",
            whose,
            expiry.isoformat(),
        )
