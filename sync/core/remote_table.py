"""A Delta table whose root is in an object store: its log mirrored to a local directory, its files as URLs.

Directory-based access (spec "Generate Temporary Table Credential") hands the reader credentials
for the table's root instead of presigned URLs. sharesync then reads the table the way its own
sharing server reads a table on disk (:mod:`sharesync.sync.server.deltalog`): the ``_delta_log``
files are copied to a local directory (only those not copied yet: commits never change, and
the listing tells which were cleaned up) through pyarrow's filesystem for the store (S3, Azure,
GCS), and each data or deletion-vector file is handed to the downloader as a URL made here with
the same credentials (:mod:`~sharesync.sync.core.store_urls`), so downloads, their deadlines and
their renewal stay the URL path's. The sharing server uses the same class for the tables it
shares from object stores.

Credentials come from a callable (:data:`KeySource`), asked again on every use, so a refreshing
source (the provider's expiring credentials) and a fixed one (the server's own keys) look alike.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable
from urllib.parse import unquote, urlparse

from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.core.store_urls import SigningError, bearer_for, gcs_endpoint, object_url, table_root

if TYPE_CHECKING:
    import pyarrow.fs as pafs

LOG_DIR = "_delta_log"
# Upper bound of a presigned URL's life (SigV4: 7 days); the credentials usually end sooner.
MAX_PRESIGN_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class Keys:
    """Store settings with credentials, and until when they hold (epoch ms; None: no end)."""

    settings: StoreSettings = field(repr=False)
    expires_ms: int | None = None


KeySource = Callable[[], Keys]


@runtime_checkable
class Renewable(Protocol):
    """A key source that can be told its credentials were refused (the provider's, not fixed keys)."""

    def renew(self) -> None: ...


class RemoteTableError(SharesyncError):
    """The table's directory cannot be read with the credentials given."""


class RemoteTable:
    """One table root in an object store, read with the credentials ``keys`` returns at the moment of use."""

    def __init__(self, location: str, keys: KeySource) -> None:
        self.location = location.rstrip("/")
        self.root = table_root(self.location)
        self._keys = keys
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteTable({self.location!r})"

    @property
    def kind(self) -> StoreKind:
        return self.root.kind

    def _filesystem(self, keys: Keys) -> pafs.FileSystem:
        from sharesync.sync.core.location import filesystem_for

        settings = keys.settings
        if self.root.kind is StoreKind.GCS and settings.oauth_token is not None:
            import pyarrow.fs as pafs

            endpoint = urlparse(gcs_endpoint(settings))
            expires = keys.expires_ms / 1000 if keys.expires_ms is not None else time.time() + 3600
            return pafs.GcsFileSystem(
                access_token=settings.oauth_token.get_secret_value(),
                credential_token_expiration=datetime.fromtimestamp(expires, UTC),
                scheme=endpoint.scheme,
                endpoint_override=endpoint.netloc,
                retry_time_limit=timedelta(seconds=10),
            )
        return filesystem_for(self.root.kind, settings, self.root.account)

    def mirror_log(self, into: Path) -> Path:
        """Copy the table's log files not copied yet into ``into/_delta_log`` (and drop those the
        store no longer has); ``into`` is then a table directory the log reader can replay.

        Refused with renewable credentials (they expired while in use, or were revoked), it asks
        for new ones and tries once more, as a refused file URL is renewed."""
        try:
            return self._mirror_log(into)
        except RemoteTableError:
            if not isinstance(self._keys, Renewable):
                raise
            self._keys.renew()
            return self._mirror_log(into)

    def _mirror_log(self, into: Path) -> Path:
        import pyarrow.fs as pafs

        keys = self._keys()
        fs = self._filesystem(keys)
        local = into / LOG_DIR
        local.mkdir(parents=True, exist_ok=True)
        selector = pafs.FileSelector(f"{self.root.fs_path}/{LOG_DIR}", allow_not_found=True)
        try:
            infos = [i for i in fs.get_file_info(selector) if i.type == pafs.FileType.File]
        except OSError as exc:
            raise RemoteTableError(f"cannot list {self.location}/{LOG_DIR}: {_first_line(exc)}") from None
        wanted = {info.base_name: info for info in infos if _is_log_file(info.base_name)}
        with self._lock:
            for name in set(os.listdir(local)) - set(wanted):
                (local / name).unlink(missing_ok=True)  # cleaned up in the store: gone here too
            for name, info in wanted.items():
                target = local / name
                if target.exists() and target.stat().st_size == info.size:
                    continue  # log files are written once (commits, checkpoints): same name, same file
                try:
                    with fs.open_input_stream(info.path) as stream:
                        data = stream.read()
                except OSError as exc:
                    raise RemoteTableError(
                        f"cannot read {self.location}/{LOG_DIR}/{name}: {_first_line(exc)}"
                    ) from None
                partial = target.with_name(f".{name}.partial")
                partial.write_bytes(data)
                if info.mtime_ns is not None:  # the log reader's last resort for a commit's time
                    os.utime(partial, ns=(info.mtime_ns, info.mtime_ns))
                partial.replace(target)
        return into

    def presign(self, log_path: str, seconds: int, now_ms: int) -> tuple[str, int]:
        """A GET URL for one file of the table (its log path, relative and URI-encoded) and its
        expiry (epoch ms): ``seconds`` from now, never past the credentials' own end."""
        keys = self._keys()
        relative = unquote(log_path)
        if "://" in relative or relative.startswith("/") or ".." in relative.split("/"):
            raise RemoteTableError(f"file path {log_path!r} is not inside the table {self.location}")
        expires_ms = now_ms + seconds * 1000
        if keys.expires_ms is not None:
            expires_ms = min(expires_ms, keys.expires_ms)
        lifetime = max(1, min(MAX_PRESIGN_SECONDS, (expires_ms - now_ms) // 1000))
        try:
            return object_url(self.root, keys.settings, relative, int(lifetime), now_ms), expires_ms
        except SigningError as exc:
            raise RemoteTableError(exc.message) from None

    def bearer(self) -> tuple[str, str] | None:
        """The origin and token GCS downloads authenticate with (None: the URLs carry their signature)."""
        return bearer_for(self.root, self._keys().settings)


def _is_log_file(name: str) -> bool:
    stem = name.split(".", 1)[0]
    return stem.isdigit() and (name.endswith(".json") or (".checkpoint" in name and name.endswith(".parquet")))


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
