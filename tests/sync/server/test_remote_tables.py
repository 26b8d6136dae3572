"""``sharesync serve`` sharing tables from S3 with access modes, and issuing temporary credentials.

Against moto's S3 with authentication on (the session's ``s3_server``): the credentials the server
hands out are STS sessions of a role, and moto checks their session token, so listing the table's
log with them proves they are real. The table is written by ``deltalake``. Starts moto: slow lane.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from deltalake import write_deltalake
from support.faults import SharingServer
from support.s3 import S3Store

from sharesync.sync.core.errors import Forbidden
from sharesync.sync.core.redact import redact
from sharesync.sync.core.storage import StoreSettings
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.server.settings import RemoteTableSpec

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def role(s3_server: S3Store) -> str:
    iam = s3_server.client("iam")
    trust = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
    arn = iam.create_role(RoleName="sharing-reader", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_role_policy(RoleName="sharing-reader", PolicyName="read", PolicyDocument=json.dumps(policy))
    return str(arn)


@pytest.fixture
def client(
    tmp_path: Path, s3_server: S3Store, role: str, start_server: Callable[..., SharingServer]
) -> Iterator[tuple[SharingClient, SharingServer, str]]:
    base = s3_server.prefix()
    for name in ("both", "dir"):
        write_deltalake(f"{base}/{name}", pa.table({"id": [1, 2, 3]}), storage_options=s3_server.options())
    (tmp_path / "root" / "sh" / "s").mkdir(parents=True)
    server = start_server(
        tmp_path / "root",
        remote_tables=(
            RemoteTableSpec(name="sh.s.both", location=f"{base}/both"),
            RemoteTableSpec(name="sh.s.dir", location=f"{base}/dir", access_modes=("dir",)),
        ),
        object_store=StoreSettings.model_validate(s3_server.settings()),
        credentials_role_arn=role,
        credential_ttl_seconds=30,
    )
    assert server.profile_path is not None
    with SharingClient(load_profile(server.profile_path)) as sharing:
        yield sharing, server, base


def test_listings_and_metadata_announce_access_modes_and_location(
    client: tuple[SharingClient, SharingServer, str], s3_server: S3Store
) -> None:
    sharing, _server, base = client
    listed = {t.name: (t.access_modes, t.location) for t in sharing.list_tables("sh", "s")}
    assert listed == {"both": (("url", "dir"), f"{base}/both"), "dir": (("dir",), f"{base}/dir")}
    meta = sharing.metadata("sh.s.dir")
    assert (meta.version, meta.metadata.access_modes, meta.metadata.location) == (0, ("dir",), f"{base}/dir")
    files = sharing.query("sh.s.both").files  # url access: S3 presigned URLs, not the server's own
    assert len(files) == 1 and files[0].url.startswith(s3_server.endpoint)
    assert "X-Amz-Signature=" in files[0].url and f"/{base.removeprefix('s3://')}/both/" in files[0].url


def test_a_dir_only_table_refuses_url_reads_and_issues_working_credentials(
    client: tuple[SharingClient, SharingServer, str], s3_server: S3Store
) -> None:
    sharing, server, base = client
    with pytest.raises(Forbidden, match="shared for dir access only; use Generate Temporary Table Credential"):
        sharing.query("sh.s.dir")
    now_ms = server.clock.now_ms()
    creds = sharing.temporary_table_credentials("sh.s.dir")
    assert server.credentials_issued == 1 and creds.location == f"{base}/dir"
    assert now_ms + 29_000 <= creds.expiration_time <= server.clock.now_ms() + 30_000
    aws = creds.aws_temp_credentials
    assert aws is not None
    fs = pafs.S3FileSystem(
        access_key=aws.access_key_id.get_secret_value(),
        secret_key=aws.secret_access_key.get_secret_value(),
        session_token=aws.session_token.get_secret_value(),
        endpoint_override=s3_server.endpoint,
        scheme="http",
        region=s3_server.region,
    )
    log = fs.get_file_info(pafs.FileSelector(f"{base.removeprefix('s3://')}/dir/_delta_log"))
    assert [i.base_name for i in log if i.base_name.endswith(".json")] == ["00000000000000000000.json"]
    for secret in creds.secrets():  # registered with the redactor on receipt
        assert redact(f"x {secret} y") == "x *** y"


def test_credentials_of_a_url_only_table_are_refused(client: tuple[SharingClient, SharingServer, str]) -> None:
    sharing, server, _base = client
    write_deltalake(server.root / "sh" / "s" / "local", pa.table({"id": [1]}))  # a table on disk: url only
    assert sharing.metadata("sh.s.local").metadata.access_modes is None
    with pytest.raises(Forbidden, match="shared for url access only; use Read Data from a Table"):
        sharing.temporary_table_credentials("sh.s.local")
    assert server.credentials_issued == 0
