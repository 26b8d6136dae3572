"""Generate Temporary Table Credential, and the access mode each table endpoint needs.

A remote table (``remote_tables`` in the settings) offers ``url`` access, ``dir`` access or both.
For ``dir`` the server hands out credentials of the table root's cloud, made with its own keys:

* **S3** — AWS session credentials: an STS ``AssumeRole`` of ``credentials_role_arn``, made with
  ``object_store``'s keys, so every answer holds new keys that the store checks (moto's S3
  verifies the session token of an assumed role);
* **Azure** — a read and list SAS of the table's container, signed with ``azure_store``'s account
  key (azure-storage-blob's ``generate_container_sas``). A provider on Azure hands out a
  *user-delegation* SAS of the table's directory, signed with a key from Azure AD; azurite has
  neither Azure AD nor directories, and the reader cannot tell the two apart: both are a query
  string appended to each blob's URL, checked by the store (including its expiry);
* **GCS** — an OAuth access token. A server cannot mint Google tokens without Google, so it issues
  them only for an emulator (``gcs_store.endpoint``: fake-gcs-server, which accepts any token).

``expirationTime`` is ``credential_ttl_seconds`` from the server's clock — tests shorten it to
seconds (STS itself grants at least 15 minutes; the SAS expires then for azurite too) to make a
reader renew mid-sync.
"""

from __future__ import annotations

import secrets as secrets_module
import uuid
from datetime import UTC, datetime

from pydantic import SecretStr

from sharesync.sync.core.redact import register_secret
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.core.store_urls import TableRoot, table_root
from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.problems import ApiError, invalid, unsupported
from sharesync.sync.server.settings import ServerSettings

_STS_MIN_SECONDS = 900


def require_url(table: SharedTable) -> SharedTable:
    require_access(table, "url")
    return table


def require_access(table: SharedTable, mode: str) -> None:
    """Refuse an endpoint of an access mode the table does not offer (a table with no
    ``accessModes`` is url-only, spec "Directory-based access")."""
    offered = table.access_modes if table.access_modes is not None else ("url",)
    if mode not in offered:
        how = "Generate Temporary Table Credential" if mode == "url" else "Read Data from a Table"
        raise ApiError(
            403,
            "PERMISSION_DENIED",
            f"Table {table.full_name} is shared for {', '.join(offered)} access only; use {how}.",
        )


def issue(
    table: SharedTable, location: str | None, settings: ServerSettings, now_ms: int
) -> tuple[tuple[str, ...], dict[str, object]]:
    """The secrets issued and the ``credentials`` answer for ``table`` (its root; ``location``
    must name it if given)."""
    require_access(table, "dir")
    assert table.location is not None  # a table offering dir is a remote table
    if location is not None and location.rstrip("/") != table.location.rstrip("/"):
        raise invalid(f"Location {location} is not a location of table {table.full_name}.")
    root = table_root(table.location)
    expires_ms = now_ms + int(settings.credential_ttl_seconds * 1000)
    expires_ms -= expires_ms % 1000  # a SAS ends on a whole second: the answer says the same instant
    store = settings.store_for(root.kind)
    if root.kind is StoreKind.S3:
        secrets, shape = _aws(store, settings.credentials_role_arn)
    elif root.kind is StoreKind.AZURE:
        secrets, shape = _azure(store, root, expires_ms)
    else:
        secrets, shape = _gcp(store)
    for secret in secrets:
        register_secret(secret)  # the server's own logs and errors mask them too
    answer = {"location": table.location, **shape, "expirationTime": expires_ms}
    return secrets, {"credentials": answer}


def _reveal(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None


def _aws(store: StoreSettings | None, role_arn: str | None) -> tuple[tuple[str, ...], dict[str, object]]:
    if store is None or role_arn is None:
        raise unsupported("This server was started without an object store and role to issue credentials from.")
    import botocore.session

    sts = botocore.session.get_session().create_client(
        "sts",
        endpoint_url=store.endpoint,
        region_name=store.region or "us-east-1",
        aws_access_key_id=_reveal(store.access_key_id),
        aws_secret_access_key=_reveal(store.secret_access_key),
    )
    session = f"sharesync-{uuid.uuid4().hex[:16]}"
    answer = sts.assume_role(RoleArn=role_arn, RoleSessionName=session, DurationSeconds=_STS_MIN_SECONDS)
    creds = answer["Credentials"]
    secrets = (creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    shape = {"accessKeyId": secrets[0], "secretAccessKey": secrets[1], "sessionToken": secrets[2]}
    return secrets, {"awsTempCredentials": shape}


def _azure(store: StoreSettings | None, root: TableRoot, expires_ms: int) -> tuple[tuple[str, ...], dict[str, object]]:
    if store is None or store.account_key is None:
        raise unsupported("This server was started without an Azure account key to sign SAS tokens with.")
    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    assert root.account is not None
    sas = generate_container_sas(
        root.account,
        root.container,
        account_key=store.account_key.get_secret_value(),
        permission=ContainerSasPermissions(read=True, list=True),
        expiry=datetime.fromtimestamp(expires_ms / 1000, UTC),
    )
    return (sas,), {"azureUserDelegationSas": {"sasToken": sas}}


def _gcp(store: StoreSettings | None) -> tuple[tuple[str, ...], dict[str, object]]:
    if store is None or store.endpoint is None:
        raise unsupported("This server issues GCP tokens for a GCS emulator only (STORAGE_EMULATOR_HOST).")
    token = f"ya29.sharesync-{secrets_module.token_urlsafe(24)}"
    return (token,), {"gcpOauthToken": {"oauthToken": token}}
