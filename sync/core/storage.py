"""The ``storage:`` section: how to reach object storage, one mapping for every client.

Targets and the staging directory may be object-store URIs (``s3://``, ``s3a://``,
``abfss://``, ``abfs://``, ``az://``, ``gs://``). Per URI prefix the section says how to reach
them: endpoint, region, credentials (none given: each client's own chain — environment,
instance role, managed identity), path-style requests, plain HTTP for a local test store::

    storage:
      "s3://lake/":
        endpoint: http://127.0.0.1:9000
        region: us-east-1
        access_key_id: ${LAKE_KEY_ID}
        secret_access_key: ${LAKE_SECRET}
        allow_http: true

``${NAME}`` in any value is replaced by the environment variable ``NAME`` when the config is
loaded (a variable that is not set is a config error), so secrets need not sit in the file.
Secrets are ``SecretStr`` and registered with :mod:`~sharesync.sync.core.redact` when loaded.

One mapping feeds three clients: :meth:`StorageSection.options_for` is ``deltalake``'s
``storage_options`` and, as environment variables, what the embedded Sail engine reads
(:meth:`StorageSection.engine_environment`: one set per process, so prefixes of one kind of
store must agree); :mod:`sharesync.sync.core.location` builds pyarrow filesystems from the same
settings; :meth:`StorageSection.remote_spark_conf` is what a remote Spark gets per bucket.
No pyarrow here: the config loads without it. No process-wide settings either: whoever reads a
target or stages a batch is handed the config's section (:func:`sharesync.sync.core.location.locate`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from urllib.parse import urlparse

from pydantic import BaseModel, BeforeValidator, ConfigDict, RootModel, SecretStr, model_validator
from pydantic_core import PydanticUndefined

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.redact import register_secret


class StoreKind(StrEnum):
    S3 = "s3"
    AZURE = "azure"
    GCS = "gcs"


SCHEMES: dict[str, StoreKind] = {
    "s3": StoreKind.S3,
    "s3a": StoreKind.S3,
    "abfs": StoreKind.AZURE,
    "abfss": StoreKind.AZURE,
    "az": StoreKind.AZURE,
    "azure": StoreKind.AZURE,
    "gs": StoreKind.GCS,
}
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

# The settings each kind of store understands (the rest of the model belongs to the others).
_FIELDS: dict[StoreKind, frozenset[str]] = {
    StoreKind.S3: frozenset(
        {"endpoint", "region", "access_key_id", "secret_access_key", "session_token", "path_style", "allow_http"}
    ),
    StoreKind.AZURE: frozenset(
        {
            "endpoint",
            "allow_http",
            "account_name",
            "account_key",
            "sas_token",
            "client_id",
            "client_secret",
            "tenant_id",
        }
    ),
    StoreKind.GCS: frozenset({"service_account_file", "endpoint", "allow_http"}),
}


def scheme_of(location: str) -> str | None:
    """The URI scheme of ``location``; None for a local path (``file://`` counts as local)."""
    if "://" not in location:
        return None
    scheme = urlparse(location).scheme.lower()
    return None if scheme == "file" else scheme


def is_remote(location: str | Path) -> bool:
    return isinstance(location, str) and scheme_of(location) is not None


def local_path(place: str | Path) -> Path | None:
    """The local path of ``place`` (a path, or a ``file://`` URI); None for an object-store URI.

    The one local-versus-remote rule: target checks, the no-op glance and :func:`locate
    <sharesync.sync.core.location.locate>` all ask it.
    """
    if isinstance(place, Path):
        return place
    if scheme_of(place) is not None:
        return None
    return Path(urlparse(place).path) if "://" in place else Path(place)  # file://…, or a plain path


class StoreSettings(BaseModel):
    """How to reach one prefix. Unset credentials: the client's own chain (environment, role)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint: str | None = None  # S3-compatible store, or an Azure or GCS emulator: http(s)://host:port[/account]
    region: str | None = None
    access_key_id: SecretStr | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    path_style: bool | None = None  # None: the clients' default (path-style with an endpoint)
    allow_http: bool = False  # plain HTTP to the endpoint: local test stores only
    account_name: str | None = None
    account_key: SecretStr | None = None
    sas_token: SecretStr | None = None
    client_id: str | None = None
    client_secret: SecretStr | None = None
    tenant_id: str | None = None
    service_account_file: Path | None = None
    oauth_token: SecretStr | None = None  # a GCP access token: issued by a provider, never configured

    def secrets(self) -> list[str]:
        values = (self.access_key_id, self.secret_access_key, self.session_token, self.account_key)
        held = (*values, self.sas_token, self.client_secret, self.oauth_token)
        return [s.get_secret_value() for s in held if s is not None]

    def check(self, kind: StoreKind) -> None:
        """ValueError for settings another kind of store owns, or that cannot work together."""
        foreign = sorted(name for name in self.model_fields_set if name not in _FIELDS[kind])
        if foreign:
            raise ValueError(f"{foreign} do not apply to {kind.value} storage (settings: {sorted(_FIELDS[kind])})")
        if (self.access_key_id is None) != (self.secret_access_key is None):
            raise ValueError("give 'access_key_id' and 'secret_access_key' together, or neither (environment/role)")
        azure_ways = [self.account_key, self.sas_token, self.client_secret]
        if sum(way is not None for way in azure_ways) > 1:
            raise ValueError("give one of 'account_key', 'sas_token' or 'client_id'/'client_secret'/'tenant_id'")
        if self.client_secret is not None and (self.client_id is None or self.tenant_id is None):
            raise ValueError("a service principal needs 'client_id', 'client_secret' and 'tenant_id'")
        if self.endpoint is not None and not self.endpoint.startswith(("http://", "https://")):
            raise ValueError(f"endpoint '{self.endpoint}' must be a URL like 'https://host:port'")
        if self.endpoint is not None and self.endpoint.startswith("http://") and not self.allow_http:
            raise ValueError("the endpoint is plain http://; set 'allow_http: true' (for a local test store only)")

    def options(self, kind: StoreKind) -> dict[str, str]:
        """The settings as object_store keys (deltalake's ``storage_options``, Sail's environment)."""
        match kind:
            case StoreKind.S3:
                return _s3_options(self)
            case StoreKind.AZURE:
                return _azure_options(self)
            case StoreKind.GCS:
                path = str(self.service_account_file) if self.service_account_file else None
                return _present({"GOOGLE_SERVICE_ACCOUNT": path, "GOOGLE_APPLICATION_CREDENTIALS": path})


def _s3_options(s: StoreSettings) -> dict[str, str]:
    virtual = None if s.path_style is None else str(not s.path_style).lower()
    return _present(
        {
            "AWS_ENDPOINT_URL": s.endpoint,
            "AWS_REGION": s.region,
            "AWS_ACCESS_KEY_ID": _reveal(s.access_key_id),
            "AWS_SECRET_ACCESS_KEY": _reveal(s.secret_access_key),
            "AWS_SESSION_TOKEN": _reveal(s.session_token),
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": virtual,
            "AWS_ALLOW_HTTP": "true" if s.allow_http else None,
        }
    )


def _azure_options(s: StoreSettings) -> dict[str, str]:
    return _present(
        {
            "AZURE_STORAGE_ACCOUNT_NAME": s.account_name,
            "AZURE_STORAGE_ACCOUNT_KEY": _reveal(s.account_key),
            "AZURE_STORAGE_SAS_TOKEN": _reveal(s.sas_token),
            "AZURE_STORAGE_CLIENT_ID": s.client_id,
            "AZURE_STORAGE_CLIENT_SECRET": _reveal(s.client_secret),
            "AZURE_STORAGE_TENANT_ID": s.tenant_id,
            "AZURE_STORAGE_ENDPOINT": s.endpoint,
            "AZURE_ALLOW_HTTP": "true" if s.allow_http else None,
        }
    )


# Each store's standard variables, by the StoreSettings field they set (S3 also AWS_ENDPOINT_URL_S3).
_AWS_VARIABLES = {
    "endpoint": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
}
_AZURE_VARIABLES = {
    "endpoint": "AZURE_STORAGE_ENDPOINT",
    "account_name": "AZURE_STORAGE_ACCOUNT_NAME",
    "account_key": "AZURE_STORAGE_ACCOUNT_KEY",
    "sas_token": "AZURE_STORAGE_SAS_TOKEN",
    "client_id": "AZURE_STORAGE_CLIENT_ID",
    "client_secret": "AZURE_STORAGE_CLIENT_SECRET",
    "tenant_id": "AZURE_STORAGE_TENANT_ID",
}


def settings_from_environment(
    kind: StoreKind, environ: Mapping[str, str] | None = None, *, targets: bool = False
) -> StoreSettings:
    """For a URI no prefix matches: what each cloud's standard variables say, read back through the
    same mapping, so pyarrow reaches the store that deltalake and the embedded engine find there.

    S3: ``AWS_ENDPOINT_URL_S3`` before ``AWS_ENDPOINT_URL`` (the AWS SDKs' order). Azure: the
    ``AZURE_STORAGE_*`` variables object_store reads, else ``AZURE_STORAGE_CONNECTION_STRING`` (the
    Azure SDKs' and azurite's form). GCS: ``STORAGE_EMULATOR_HOST`` (Google's client libraries).
    A plain ``http://`` endpoint from the environment is allowed: the environment chose it.
    For ``targets`` the connection string is not read: the engines (object_store) do not read it,
    and pyarrow must reach the store they write to.
    """
    env = os.environ if environ is None else environ
    if kind is StoreKind.GCS:
        host = env.get("STORAGE_EMULATOR_HOST")
        endpoint = host if not host or "://" in host else f"http://{host}"
        return StoreSettings(endpoint=endpoint, allow_http=bool(endpoint and endpoint.startswith("http://")))
    names = _AZURE_VARIABLES if kind is StoreKind.AZURE else _AWS_VARIABLES
    found: dict[str, object] = {field: env[name] for field, name in names.items() if env.get(name)}
    if kind is StoreKind.S3 and env.get("AWS_ENDPOINT_URL_S3"):
        found["endpoint"] = env["AWS_ENDPOINT_URL_S3"]
    if kind is StoreKind.AZURE and not found and not targets and env.get("AZURE_STORAGE_CONNECTION_STRING"):
        found = _connection_string(env["AZURE_STORAGE_CONNECTION_STRING"])
    if str(found.get("endpoint", "")).startswith("http://"):
        found["allow_http"] = True
    settings = StoreSettings.model_validate(found)
    for secret in settings.secrets():
        register_secret(secret)  # an account key from a connection string is as secret as a configured one
    return settings


def _connection_string(text: str) -> dict[str, object]:
    """``AccountName=…;AccountKey=…;BlobEndpoint=…`` (or ``SharedAccessSignature=…``) as settings."""
    parts = dict(part.split("=", 1) for part in text.split(";") if "=" in part)
    found: dict[str, object] = {
        "account_name": parts.get("AccountName"),
        "account_key": parts.get("AccountKey"),
        "sas_token": parts.get("SharedAccessSignature"),
        "endpoint": parts.get("BlobEndpoint"),
    }
    return {field: value for field, value in found.items() if value}


def _reveal(secret: SecretStr | None) -> str | None:
    return None if secret is None else secret.get_secret_value()


def _present(values: Mapping[str, str | None]) -> dict[str, str]:
    return {key: value for key, value in values.items() if value is not None}


class StorageSection(RootModel[dict[str, StoreSettings]]):
    """``storage:``: settings per URI prefix; the longest prefix that matches a URI applies."""

    model_config = ConfigDict(frozen=True)
    root: dict[str, StoreSettings] = {}

    @model_validator(mode="before")
    @classmethod
    def _expand_environment(cls, raw: object) -> object:
        if raw is None or raw is PydanticUndefined:
            return {}
        if not isinstance(raw, dict):
            raise ValueError("must map URI prefixes (e.g. 's3://lake/') to their settings")
        return {prefix: _expand(prefix, settings) for prefix, settings in raw.items()}

    @model_validator(mode="after")
    def _check_prefixes(self) -> StorageSection:
        for prefix, settings in self.root.items():
            kind = SCHEMES.get(scheme_of(prefix) or "")
            if kind is None or not urlparse(prefix).netloc:
                known = ", ".join(f"{s}://" for s in SCHEMES)
                raise ValueError(f"'{prefix}' is not an object-store URI prefix like 's3://bucket/' ({known})")
            try:
                settings.check(kind)
            except ValueError as exc:
                raise ValueError(f"'{prefix}': {exc}") from None
        for secret in self.secrets():
            register_secret(secret)  # masked wherever it might appear: errors, logs, run records
        return self

    def match(self, location: str) -> tuple[str, StoreSettings] | None:
        """The most specific configured prefix of ``location`` and its settings."""
        found = [(p, s) for p, s in self.root.items() if _under(location, p)]
        return max(found, key=lambda item: len(item[0])) if found else None

    def options_for(self, location: str) -> dict[str, str]:
        """``deltalake``'s ``storage_options`` for ``location`` ({}: local, or no prefix configured)."""
        scheme = scheme_of(location)
        matched = self.match(location) if scheme is not None else None
        return matched[1].options(SCHEMES[scheme]) if matched is not None and scheme in SCHEMES else {}

    def engine_environment(self) -> dict[str, str]:
        """The environment variables the embedded engine needs: one set for the whole process.

        Every prefix of one kind of store must ask for the same set; otherwise the embedded
        engine would silently reach one of them with the other's settings.
        """
        chosen: dict[StoreKind, tuple[str, dict[str, str]]] = {}
        for prefix, settings in self.root.items():
            kind = SCHEMES[scheme_of(prefix) or ""]
            options = settings.options(kind)
            if kind in chosen and chosen[kind][1] != options:
                other, theirs = chosen[kind]
                differ = sorted({k for k in {*options, *theirs} if options.get(k) != theirs.get(k)})
                raise ConfigError(
                    f"storage: '{other}' and '{prefix}' need different {kind.value} settings ({', '.join(differ)}), "
                    "but the embedded engine reads one set of environment variables per process; give them the "
                    "same settings, or run a Spark Connect server (spark.remote) configured for both"
                )
            chosen[kind] = (prefix, options)
        return {key: value for _, options in chosen.values() for key, value in options.items()}

    def remote_spark_conf(self) -> dict[str, str]:
        """Per-bucket S3A settings for a remote Apache Spark; never credentials (server-side)."""
        conf: dict[str, str] = {}
        for prefix, settings in self.root.items():
            if SCHEMES[scheme_of(prefix) or ""] is not StoreKind.S3:
                continue
            base = f"fs.s3a.bucket.{urlparse(prefix).netloc}"
            wanted = {
                f"{base}.endpoint": settings.endpoint,
                f"{base}.endpoint.region": settings.region,
                f"{base}.path.style.access": None if settings.path_style is None else str(settings.path_style).lower(),
                f"{base}.connection.ssl.enabled": "false" if settings.allow_http else None,
            }
            for key, value in _present(wanted).items():
                if conf.setdefault(key, value) != value:
                    raise ConfigError(f"storage: prefixes in one bucket disagree on '{key}' for the remote Spark")
        return conf

    def secrets(self) -> list[str]:
        return [secret for settings in self.root.values() for secret in settings.secrets()]


def _under(location: str, prefix: str) -> bool:
    base = prefix.rstrip("/")
    return location == base or location.startswith(base + "/")


def _expand(prefix: str, settings: object) -> object:
    """``settings`` with ``${NAME}`` replaced in every string value (ValueError if NAME is unset)."""
    if not isinstance(settings, dict):
        return settings

    def value(field: str, raw: object) -> object:
        if not isinstance(raw, str):
            return raw

        def variable(found: re.Match[str]) -> str:
            name = found.group(1)
            if name not in os.environ:
                raise ValueError(f"'{prefix}'.{field} names the environment variable {name}, which is not set")
            return os.environ[name]

        return _ENV_REFERENCE.sub(variable, raw)

    return {field: value(field, raw) for field, raw in settings.items()}


def _staging_place(value: object) -> object:
    """A local staging directory stays a Path; an object-store URI stays the URI."""
    if isinstance(value, str) and is_remote(value):
        if SCHEMES.get(scheme_of(value) or "") is None:
            raise ValueError(f"'{value}' is not a supported staging location (a directory, or {', '.join(SCHEMES)})")
        return value.rstrip("/")
    return Path(value) if isinstance(value, str) else value


StagingDir = Annotated[Path | str, BeforeValidator(_staging_place)]


def resolve_place(place: Path | str, base_dir: Path) -> Path | str:
    """A relative local path is relative to the config file; a URI is what it says."""
    if isinstance(place, str):
        return place
    return place if place.is_absolute() else base_dir / place
