"""A directory or file on the local disk or in an object store, as every client addresses it.

A :class:`Location` pairs what the engine and ``deltalake`` are given (``uri``: a local path or
the object-store URI) with a pyarrow filesystem and the path inside it, built from the
``storage:`` settings (:mod:`sharesync.sync.core.storage`) for that URI, and ``deltalake``'s
``storage_options`` from the same settings (:func:`open_delta` opens a Delta table there). Staged batches are
written, listed, read and removed through it, and target checks list and probe through it, so
one code path serves the local disk and S3, Azure or GCS alike. Two differences of object
stores are handled here: an object appears whole when its upload completes (no temporary
name and rename needed), and a directory exists only while something is in it (an empty
``_sharesync_dir`` marker keeps an empty one visible; names starting with ``_`` are no data).

pyarrow is imported lazily: loading a config, or a sync with nothing new on local targets,
never pays for it.
"""

from __future__ import annotations

import functools
import os
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sharesync.sync.core.errors import ConfigError, SharesyncError, TargetError
from sharesync.sync.core.storage import (
    SCHEMES,
    StorageSection,
    StoreKind,
    StoreSettings,
    local_path,
    scheme_of,
    settings_from_environment,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

DIR_MARKER = "_sharesync_dir"


# deltalake and the embedded engine (object_store) write GCS objects with the XML API, which
# fake-gcs-server does not serve (fsouza/fake-gcs-server#331): a GCS endpoint is for reading only.
_NO_GCS_EMULATOR = (
    "'{uri}': targets and staging on gs:// reach Google Cloud Storage itself; a GCS endpoint (an emulator, "
    "STORAGE_EMULATOR_HOST) applies to provider_storage: (directory access) only — unset it for this process "
    "or use a local, s3:// or abfss:// target"
)


@dataclass(frozen=True)
class Location:
    """One place: ``uri`` for the engine and deltalake, ``path`` inside ``filesystem`` for pyarrow."""

    uri: str
    path: str
    filesystem: pafs.FileSystem
    prefix: str | None = None  # the storage: prefix whose settings apply (None: local or unconfigured)
    # deltalake's storage_options for it (None: local, or each client's own chain — the environment)
    storage_options: dict[str, str] | None = None

    @property
    def is_local(self) -> bool:
        return scheme_of(self.uri) is None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return self.uri

    def join(self, *parts: str) -> Location:
        tail = "/".join(parts)
        uri, path = f"{self.uri.rstrip('/')}/{tail}", f"{self.path.rstrip('/')}/{tail}"
        return Location(uri, path, self.filesystem, self.prefix, self.storage_options)

    def kind(self) -> str:
        """``file``, ``directory`` or ``missing``."""
        import pyarrow.fs as pafs

        found = self.filesystem.get_file_info(self.path).type
        return {pafs.FileType.File: "file", pafs.FileType.Directory: "directory"}.get(found, "missing")

    def children(self, *, recursive: bool = False) -> list[tuple[str, bool]]:
        """``(path relative to this directory, is a file)`` of what is below it; [] when missing."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.path, allow_not_found=True, recursive=recursive)
        base = self.path.rstrip("/") + "/"
        found = self.filesystem.get_file_info(selector)
        return sorted((i.path.removeprefix(base), i.type == pafs.FileType.File) for i in found)

    def files(self) -> list[Location]:
        """The files directly in this directory, by name."""
        return [self.join(name) for name, is_file in self.children() if is_file]

    def make_empty(self) -> Location:
        """An empty directory here: what a crashed attempt left is removed first."""
        self.remove()
        if self.is_local:
            self.filesystem.create_dir(self.path, recursive=True)
        else:  # no directory objects for the parents: nothing is left once this one is removed
            with self.filesystem.open_output_stream(self.join(DIR_MARKER).path):
                pass
        return self

    def remove(self) -> None:
        """Remove this directory and everything in it; nothing there is fine."""
        try:
            self.filesystem.delete_dir(self.path)
        except FileNotFoundError:
            pass

    def delete(self) -> None:
        self.filesystem.delete_file(self.path)

    @contextmanager
    def publish(self) -> Iterator[str]:
        """A path to write this file at; readers see it only once it is complete.

        Locally a temporary name (``*.tmp``, which no reader takes) renamed at the end; in an
        object store the object itself, which appears whole when its upload completes.
        """
        if not self.is_local:
            yield self.path
            return
        temporary = f"{self.path}.tmp"
        yield temporary
        os.replace(temporary, self.path)

    def open_input(self) -> pa.NativeFile:
        return self.filesystem.open_input_file(self.path)


Place = Location | Path | str


def locate(place: Place, storage: StorageSection | None = None) -> Location:
    """The :class:`Location` of a local path or an object-store URI, reached with ``storage``'s
    settings for its prefix (None, or no prefix matching: each client's own chain — the environment).

    A :class:`Location` is returned as it is: it was located with its settings already.
    """
    if isinstance(place, Location):
        return place
    text = str(place)
    local = local_path(place)
    if local is not None:
        return Location(str(local.absolute()), str(local.absolute()), _local_filesystem())
    kind = SCHEMES.get(scheme_of(text) or "")
    if kind is None:
        raise ConfigError(f"'{text}': sharesync reads and writes local paths and {', '.join(SCHEMES)} URIs only")
    matched = storage.match(text) if storage is not None else None
    settings = matched[1] if matched is not None else settings_from_environment(kind, targets=True)
    if kind is StoreKind.GCS and settings.endpoint is not None:
        raise ConfigError(_NO_GCS_EMULATOR.format(uri=text))
    container, key, account = _split(kind, text, settings)
    filesystem = _filesystem(kind, settings, account)
    options = matched[1].options(kind) if matched is not None else None
    return Location(
        text.rstrip("/"), f"{container}/{key}".rstrip("/"), filesystem, matched[0] if matched else None, options or None
    )


def _split(kind: StoreKind, uri: str, settings: StoreSettings | None) -> tuple[str, str, str | None]:
    """Bucket (or container), key and, for Azure, the storage account of ``uri``."""
    parsed = urlparse(uri)
    key = parsed.path.strip("/")
    if kind is not StoreKind.AZURE:
        return parsed.netloc, key, None
    container, _, host = parsed.netloc.partition("@")  # abfss://container@account.dfs.core.windows.net/key
    account = host.split(".")[0] if host else (settings.account_name if settings else None)
    account = account or os.environ.get("AZURE_STORAGE_ACCOUNT_NAME")
    if not account:
        raise ConfigError(
            f"'{uri}' names no storage account; use abfss://container@ACCOUNT.dfs.core.windows.net/…, or set "
            "'account_name' in the storage: settings of its prefix"
        )
    return container, key, account


@functools.cache
def _local_filesystem() -> pafs.FileSystem:
    import pyarrow.fs as pafs

    return pafs.LocalFileSystem()


def filesystem_for(kind: StoreKind, settings: StoreSettings, account: str | None = None) -> pafs.FileSystem:
    """The pyarrow filesystem of a store (Azure: of its storage ``account``)."""
    return _filesystem(kind, settings, account)


@functools.lru_cache(maxsize=32)
def _filesystem(kind: StoreKind, s: StoreSettings, account: str | None) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    secret = _reveal
    if kind is StoreKind.S3:
        endpoint = {"endpoint_override": s.endpoint, "scheme": urlparse(s.endpoint).scheme} if s.endpoint else {}
        return pafs.S3FileSystem(
            access_key=secret(s.access_key_id),
            secret_key=secret(s.secret_access_key),
            session_token=secret(s.session_token),
            region=s.region,
            force_virtual_addressing=s.path_style is False,
            **endpoint,
        )
    if kind is StoreKind.AZURE:
        assert account is not None
        host = urlparse(s.endpoint) if s.endpoint else None
        emulated = {"blob_storage_authority": host.netloc, "dfs_storage_authority": host.netloc} if host else {}
        schemes = {"blob_storage_scheme": host.scheme, "dfs_storage_scheme": host.scheme} if host else {}
        return pafs.AzureFileSystem(
            account,
            account_key=secret(s.account_key),
            # pyarrow appends the token to the account's URL as it is: without its "?" the SAS
            # lands in the path (azurite: 400 OutOfRangeInput).
            sas_token=None if s.sas_token is None else "?" + s.sas_token.get_secret_value().lstrip("?"),
            client_id=s.client_id,
            client_secret=secret(s.client_secret),
            tenant_id=s.tenant_id,
            **emulated,
            **schemes,
        )
    _gcs_credentials(s)
    if s.endpoint is None:
        return pafs.GcsFileSystem()
    host = urlparse(s.endpoint)  # an emulator (STORAGE_EMULATOR_HOST): it checks no credentials
    anonymous = s.allow_http and s.service_account_file is None
    return pafs.GcsFileSystem(anonymous=anonymous, scheme=host.scheme, endpoint_override=host.netloc)


def _reveal(secret: object) -> str | None:
    from pydantic import SecretStr

    return secret.get_secret_value() if isinstance(secret, SecretStr) else None


def _gcs_credentials(settings: StoreSettings) -> None:
    """pyarrow's GCS client takes a service account only from GOOGLE_APPLICATION_CREDENTIALS."""
    if settings.service_account_file is None:
        return
    wanted, current = str(settings.service_account_file), os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if current not in (None, wanted):
        raise ConfigError(
            f"storage: service_account_file '{wanted}' differs from GOOGLE_APPLICATION_CREDENTIALS ('{current}'); "
            "one process uses one service account for GCS"
        )
    os.environ["GOOGLE_APPLICATION_CREDENTIALS"] = wanted


# ---------------------------------------------------------------- what a storage failure means

_CREDENTIALS = re.compile(
    r"INVALID_ACCESS_KEY_ID|SIGNATURE_DOES_NOT_MATCH|InvalidAccessKeyId|SignatureDoesNotMatch|"
    r"AuthenticationFailed|InvalidAuthenticationInfo|invalid_grant|EXPIRED_TOKEN|ExpiredToken|InvalidToken"
)
_NO_BUCKET = re.compile(r"NO_SUCH_BUCKET|NoSuchBucket|ContainerNotFound|container does not exist|bucket does not exist")
_UNREACHABLE = re.compile(
    r"NETWORK_CONNECTION|Could not connect|Couldn't connect|Could not resolve|Couldn't resolve|"
    r"Connection refused|Failed to connect|timed out",
    re.IGNORECASE,
)
_DENIED = re.compile(r"ACCESS_DENIED|AccessDenied|AuthorizationPermissionMismatch|AuthorizationFailure|Forbidden|403")


def storage_failure(exc: BaseException, what: str, location: Location) -> SharesyncError | None:
    """The error to report for ``exc`` raised while touching ``location``; None: not a known kind.

    ``what`` names the location for a person (``target 's3://…'``). Wrong credentials, a missing
    bucket and an unreachable endpoint are config mistakes (:class:`ConfigError`); a refusal to
    credentials that are valid is a target that is not writable (:class:`TargetError`).
    """
    text = str(exc)
    settings = f"storage['{location.prefix}']" if location.prefix else "the storage: section (or the environment)"
    bucket = location.path.split("/", 1)[0]
    if _CREDENTIALS.search(text):
        return ConfigError(f"{what}: the store rejects the credentials; check the credentials in {settings}")
    if _NO_BUCKET.search(text):
        return ConfigError(f"{what}: the bucket or container '{bucket}' does not exist; create it, or fix the URI")
    if _UNREACHABLE.search(text):
        return ConfigError(
            f"{what}: cannot reach the store ({_first_line(text)}); check 'endpoint' in {settings}, "
            "and that the store is up"
        )
    if _DENIED.search(text):
        return TargetError(
            f"{what} is not writable: the store denies these credentials access; grant them read, write, list and "
            f"delete on it, or choose another location ({settings})"
        )
    return None


def _first_line(text: str) -> str:
    reason = text.strip().splitlines()[0] if text.strip() else "no answer"
    return reason[:200]


def probe_writable(location: Location, what: str) -> None:
    """Write and delete one small object below ``location``: a clear error now, not half-way later.

    For an object store only (local directories have their own checks): its permissions,
    credentials, bucket and endpoint show only when something is written.
    """
    if location.is_local:
        return
    probe = location.join(f".sharesync-probe-{uuid.uuid4().hex}")
    try:
        with location.filesystem.open_output_stream(probe.path) as out:
            out.write(b"sharesync checks that it may write here; this object is deleted at once\n")
        probe.delete()
    except OSError as exc:
        failure = storage_failure(exc, what, location)
        if failure is None:
            raise
        raise failure from None
