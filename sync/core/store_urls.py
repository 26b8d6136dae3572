"""Where a shared table's root is, and a GET URL for one of its objects with the credentials at hand.

Directory-based access hands the reader credentials for a table root; each file is then given to
the downloader as a URL, so downloads, their deadlines and their renewal stay the URL path's:

* **S3** — a SigV4 query-string signature (botocore's signer; no client, no request sent), with
  the provider's session credentials or the server's own keys;
* **Azure** — the blob's URL with the SAS appended: a user-delegation SAS from the provider is
  already a signature of the whole root; the server's own account key signs a read-only blob SAS
  (azure-storage-blob's ``generate_blob_sas``);
* **GCS** — an OAuth access token signs nothing: the URL is the object's media download, sent
  with the token as a bearer header by the downloader (:func:`bearer_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, urlparse

from pydantic import SecretStr

from sharesync.sync.core.errors import ConfigError, SharesyncError
from sharesync.sync.core.storage import SCHEMES, StoreKind, StoreSettings, scheme_of

_ROOT_SCHEMES = {**SCHEMES, "wasb": StoreKind.AZURE, "wasbs": StoreKind.AZURE}
GCS_ENDPOINT = "https://storage.googleapis.com"


class SigningError(SharesyncError):
    """No credentials of the kind the store needs to hand out a URL."""


@dataclass(frozen=True)
class TableRoot:
    """A table root in an object store: bucket (container), key prefix and, for Azure, its account."""

    kind: StoreKind
    container: str
    prefix: str
    account: str | None = None

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    @property
    def canonical(self) -> str:
        """The root as ``storage:`` prefixes name it (a ``wasbs://`` root as its ``abfss://`` twin)."""
        if self.kind is StoreKind.AZURE:
            return f"abfss://{self.container}@{self.account}.dfs.core.windows.net/{self.prefix}".rstrip("/")
        scheme = "s3" if self.kind is StoreKind.S3 else "gs"
        return f"{scheme}://{self.container}/{self.prefix}".rstrip("/")

    @property
    def fs_path(self) -> str:
        """The root as pyarrow's filesystems address it: ``container/prefix``."""
        return f"{self.container}/{self.prefix}".rstrip("/")


def table_root(location: str) -> TableRoot:
    """The parts of a table root (``s3://``, ``abfss://``/``wasbs://``, ``gs://``); others refused by name."""
    kind = _ROOT_SCHEMES.get(scheme_of(location) or "")
    if kind is None:
        raise ConfigError(
            f"'{location}': directory-based access reads tables in S3 (s3://), Azure (abfss://, wasbs://) or "
            "GCS (gs://) only"
        )
    parsed = urlparse(location)
    prefix = parsed.path.strip("/")
    if kind is not StoreKind.AZURE:
        return TableRoot(kind, parsed.netloc, prefix)
    container, _, host = parsed.netloc.partition("@")
    if not container or not host:
        raise ConfigError(f"'{location}': an Azure table root is abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/path")
    return TableRoot(kind, container, prefix, host.split(".")[0])


def object_url(root: TableRoot, settings: StoreSettings, relative: str, seconds: int, now_ms: int) -> str:
    """A GET URL of ``relative`` (a path under the root, not URI-encoded) valid ``seconds`` from now."""
    key = root.key(relative)
    match root.kind:
        case StoreKind.S3:
            return _s3_url(settings, root.container, key, seconds)
        case StoreKind.AZURE:
            return _azure_url(root, settings, key, seconds, now_ms)
        case StoreKind.GCS:
            base = gcs_endpoint(settings)
            return f"{base}/download/storage/v1/b/{root.container}/o/{quote(key, safe='')}?alt=media"


def gcs_endpoint(settings: StoreSettings) -> str:
    return (settings.endpoint or GCS_ENDPOINT).rstrip("/")


def bearer_for(root: TableRoot, settings: StoreSettings) -> tuple[str, str] | None:
    """The origin (``scheme://host:port``) and token a GCS download sends as ``Authorization: Bearer``."""
    if root.kind is not StoreKind.GCS or settings.oauth_token is None:
        return None
    parsed = urlparse(gcs_endpoint(settings))
    return f"{parsed.scheme}://{parsed.netloc}", settings.oauth_token.get_secret_value()


def azure_blob_endpoint(settings: StoreSettings, account: str) -> str:
    """``https://ACCOUNT.blob.core.windows.net``, or the endpoint given (an emulator's ``…/ACCOUNT``)."""
    return (settings.endpoint or f"https://{account}.blob.core.windows.net").rstrip("/")


def _azure_url(root: TableRoot, settings: StoreSettings, key: str, seconds: int, now_ms: int) -> str:
    assert root.account is not None
    url = f"{azure_blob_endpoint(settings, root.account)}/{root.container}/{quote(key, safe='/~')}"
    if settings.sas_token is not None:
        return f"{url}?{settings.sas_token.get_secret_value().lstrip('?')}"
    if settings.account_key is None:
        raise SigningError(f"no SAS token or account key to sign a URL of {root.container}/{key} with")
    from azure.storage.blob import BlobSasPermissions, generate_blob_sas

    sas = generate_blob_sas(
        root.account,
        root.container,
        key,
        account_key=settings.account_key.get_secret_value(),
        permission=BlobSasPermissions(read=True),
        expiry=datetime.fromtimestamp(now_ms / 1000 + seconds, UTC),
    )
    return f"{url}?{sas}"


def _s3_url(settings: StoreSettings, bucket: str, key: str, seconds: int) -> str:
    """Path-style when an endpoint is set (S3-compatible stores), virtual-hosted on AWS."""
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
        raise SigningError(f"no credentials to sign a URL of s3://{bucket}/{key} with")
    request = AWSRequest(method="GET", url=url)
    signer = S3SigV4QueryAuth(
        Credentials(access, secret, reveal(settings.session_token)), "s3", region, expires=seconds
    )
    signer.add_auth(request)
    return str(request.url)
