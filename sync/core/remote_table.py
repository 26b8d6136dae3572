"""A Delta table whose root is in S3: its log mirrored to a local directory, its files presigned.

Directory-based access (spec "Generate Temporary Table Credential") hands the reader credentials
for the table's root instead of presigned URLs. sharesync then reads the table the way its own
sharing server reads a table on disk (:mod:`sharesync.sync.server.deltalog`): the ``_delta_log``
files are copied to a local directory (only those not copied yet: commits never change, and
the listing tells which were cleaned up), and each data or deletion-vector file is handed to
the downloader as a URL presigned here with the same credentials (botocore's SigV4 presigner),
so downloads, their deadlines and their renewal stay the URL path's. The sharing server uses
the same class for tables it shares from S3.

Credentials come from a callable (:data:`KeySource`), asked again on every use, so a refreshing
source (the provider's expiring credentials) and a fixed one (the server's own keys) look alike.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote, urlparse

from pydantic import SecretStr

from sharesync.sync.core.errors import ConfigError, SharesyncError
from sharesync.sync.core.storage import SCHEMES, StoreKind, StoreSettings, scheme_of

if TYPE_CHECKING:
    import pyarrow.fs as pafs

LOG_DIR = "_delta_log"
# Upper bound of a SigV4 presigned URL's life (AWS: 7 days); the credentials usually end sooner.
MAX_PRESIGN_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class Keys:
    """Store settings with credentials, and until when they hold (epoch ms; None: no end)."""

    settings: StoreSettings = field(repr=False)
    expires_ms: int | None = None


KeySource = Callable[[], Keys]


class RemoteTableError(SharesyncError):
    """The table's directory cannot be read with the credentials given."""


def s3_location(location: str) -> tuple[str, str]:
    """Bucket and key prefix of an ``s3://`` table root; other schemes are refused by name."""
    scheme = scheme_of(location)
    if scheme is None or SCHEMES.get(scheme) is not StoreKind.S3:
        raise ConfigError(f"'{location}': directory-based access reads tables in S3 only (s3:// or s3a://)")
    parsed = urlparse(location)
    return parsed.netloc, parsed.path.strip("/")


class RemoteTable:
    """One table root in S3, read with the credentials ``keys`` returns at the moment of use."""

    def __init__(self, location: str, keys: KeySource) -> None:
        self.location = location.rstrip("/")
        self.bucket, self.prefix = s3_location(self.location)
        self._keys = keys
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteTable({self.location!r})"

    def _filesystem(self, settings: StoreSettings) -> pafs.FileSystem:
        from sharesync.sync.core.location import filesystem_for

        return filesystem_for(StoreKind.S3, settings)

    def mirror_log(self, into: Path) -> Path:
        """Copy the table's log files not copied yet into ``into/_delta_log`` (and drop those the
        store no longer has); ``into`` is then a table directory the log reader can replay."""
        import pyarrow.fs as pafs

        keys = self._keys()
        fs = self._filesystem(keys.settings)
        local = into / LOG_DIR
        local.mkdir(parents=True, exist_ok=True)
        selector = pafs.FileSelector(f"{self.bucket}/{self.prefix}/{LOG_DIR}", allow_not_found=True)
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
        key = f"{self.prefix}/{relative}" if self.prefix else relative
        return _presign_get(keys.settings, self.bucket, key, int(lifetime)), expires_ms


def _is_log_file(name: str) -> bool:
    stem = name.split(".", 1)[0]
    return stem.isdigit() and (name.endswith(".json") or (".checkpoint" in name and name.endswith(".parquet")))


def _presign_get(settings: StoreSettings, bucket: str, key: str, seconds: int) -> str:
    """SigV4 query-string signature of a GET (botocore's signer; no client, no request sent).
    Path-style when an endpoint is set (S3-compatible stores), virtual-hosted on AWS."""
    from botocore.auth import S3SigV4QueryAuth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    def reveal(value: SecretStr | None) -> str | None:
        return value.get_secret_value() if value is not None else None

    region = settings.region or "us-east-1"
    path = quote(key, safe="/~")
    if settings.endpoint and settings.path_style is not False:
        url = f"{settings.endpoint.rstrip('/')}/{bucket}/{path}"
    elif settings.endpoint:
        parsed = urlparse(settings.endpoint)
        url = f"{parsed.scheme}://{bucket}.{parsed.netloc}/{path}"
    else:
        url = f"https://{bucket}.s3.{region}.amazonaws.com/{path}"
    access, secret = reveal(settings.access_key_id), reveal(settings.secret_access_key)
    if access is None or secret is None:
        raise RemoteTableError(f"no credentials to sign a URL of s3://{bucket}/{key} with")
    request = AWSRequest(method="GET", url=url)
    signer = S3SigV4QueryAuth(
        Credentials(access, secret, reveal(settings.session_token)), "s3", region, expires=seconds
    )
    signer.add_auth(request)
    return str(request.url)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
