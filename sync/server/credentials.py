"""Generate Temporary Table Credential, and the access mode each table endpoint needs.

A remote table (``remote_tables`` in the settings) offers ``url`` access, ``dir`` access or both.
For ``dir`` the server hands out AWS session credentials: an STS ``AssumeRole`` of
``credentials_role_arn``, made with the server's own keys (``object_store``), so every answer
holds new keys that the store checks (moto's S3 verifies the session token of an assumed role).
``expirationTime`` is ``credential_ttl_seconds`` from the server's clock — tests shorten it to
seconds (STS itself grants at least 15 minutes) to make a reader renew mid-sync.
"""

from __future__ import annotations

import uuid

from sharesync.sync.core.redact import register_secret
from sharesync.sync.core.storage import StoreSettings
from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.problems import ApiError, invalid, unsupported

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
    table: SharedTable,
    location: str | None,
    store: StoreSettings | None,
    role_arn: str | None,
    now_ms: int,
    ttl_seconds: float,
) -> tuple[tuple[str, ...], dict[str, object]]:
    """The secrets issued and the ``credentials`` answer for ``table`` (its root; ``location``
    must name it if given)."""
    require_access(table, "dir")
    assert table.location is not None  # a table offering dir is a remote table
    if location is not None and location.rstrip("/") != table.location.rstrip("/"):
        raise invalid(f"Location {location} is not a location of table {table.full_name}.")
    if store is None or role_arn is None:
        raise unsupported("This server was started without an object store and role to issue credentials from.")
    import botocore.session

    def reveal(value: object) -> str | None:
        from pydantic import SecretStr

        return value.get_secret_value() if isinstance(value, SecretStr) else None

    sts = botocore.session.get_session().create_client(
        "sts",
        endpoint_url=store.endpoint,
        region_name=store.region or "us-east-1",
        aws_access_key_id=reveal(store.access_key_id),
        aws_secret_access_key=reveal(store.secret_access_key),
    )
    session = f"sharesync-{uuid.uuid4().hex[:16]}"
    answer = sts.assume_role(RoleArn=role_arn, RoleSessionName=session, DurationSeconds=_STS_MIN_SECONDS)
    creds = answer["Credentials"]
    secrets = (creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    for secret in secrets:
        register_secret(secret)  # the server's own logs and errors mask them too
    return secrets, {
        "credentials": {
            "location": table.location,
            "awsTempCredentials": {
                "accessKeyId": creds["AccessKeyId"],
                "secretAccessKey": creds["SecretAccessKey"],
                "sessionToken": creds["SessionToken"],
            },
            "expirationTime": now_ms + int(ttl_seconds * 1000),
        }
    }
