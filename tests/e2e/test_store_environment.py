"""With no ``provider_storage:`` endpoint, directory access finds the store the way each cloud's SDKs do.

S3: ``AWS_ENDPOINT_URL_S3`` (before ``AWS_ENDPOINT_URL``); Azure: ``AZURE_STORAGE_CONNECTION_STRING``
(azurite's own form); GCS: ``STORAGE_EMULATOR_HOST`` (Google's client libraries). The sharing server
is the provider's: it is given its store explicitly, so only the recipient reads the variables. One
dir-only table per store, written by ``deltalake`` on disk and copied into the emulator; one sync
into a local merge target must hold the table's rows. (Before, the recipient ignored
``AWS_ENDPOINT_URL_S3`` and signed URLs for AWS itself.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.azurite import ACCOUNT, KEY, AzuriteStore, azurite_store
from support.e2e import Workspace
from support.faults import SharingServer
from support.gcs import gcs_store
from support.s3 import S3Store

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.storage import StoreKind, StoreSettings
from sharesync.sync.server.settings import RemoteTableSpec

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Emulated:
    kind: StoreKind
    location: str
    upload: Callable[[Path, str], None]
    environment: dict[str, str]
    server: StoreSettings
    role: str | None = None


def _azure_upload(store: AzuriteStore, directory: Path, uri: str) -> None:
    target = store._filesystem()  # noqa: SLF001 - the test store's own client
    path = uri.removeprefix(f"{store.root}/")
    for file in sorted(p for p in directory.rglob("*") if p.is_file()):
        with target.open_output_stream(f"lake/{path}/{file.relative_to(directory).as_posix()}") as out:
            out.write(file.read_bytes())


@pytest.fixture(params=["s3", "azure", "gcs"])
def emulated(request: pytest.FixtureRequest) -> Iterator[Emulated]:
    if request.param == "s3":
        store: S3Store
        store, role = request.getfixturevalue("open_s3_server")
        env = {"AWS_ENDPOINT_URL_S3": store.endpoint, "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # the S3 one wins
               "AWS_ACCESS_KEY_ID": store.access_key_id, "AWS_SECRET_ACCESS_KEY": store.secret_access_key,
               "AWS_REGION": store.region}  # fmt: skip
        own = StoreSettings.model_validate(store.settings())
        yield Emulated(StoreKind.S3, f"{store.prefix()}/t", store.upload, env, own, role)
    elif request.param == "azure":
        with azurite_store() as azure:
            text = (
                f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};BlobEndpoint={azure.endpoint};"
            )
            env = {"AZURE_STORAGE_CONNECTION_STRING": text}
            own = StoreSettings.model_validate(
                {"account_name": ACCOUNT, "account_key": KEY, "endpoint": azure.endpoint, "allow_http": True}
            )
            yield Emulated(StoreKind.AZURE, f"{azure.prefix()}/t", partial(_azure_upload, azure), env, own)
    else:
        with gcs_store() as gcs:
            host = gcs.endpoint.removeprefix("http://")
            own = StoreSettings(endpoint=gcs.endpoint, allow_http=True)
            yield Emulated(StoreKind.GCS, f"{gcs.prefix()}/t", gcs.upload, {"STORAGE_EMULATOR_HOST": host}, own)


def test_a_dir_table_is_read_through_the_clouds_standard_endpoint_variables(
    tmp_path: Path, start_server: Callable[..., SharingServer], emulated: Emulated, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only this cloud's variables: an earlier test's engine may have left others in this process
    # (an AZURE_STORAGE_ACCOUNT_KEY alone hides the connection string, as it does in the SDKs).
    for name in [n for n in os.environ if n.startswith("AZURE_STORAGE_")]:
        monkeypatch.delenv(name)
    for name in ("AWS_ENDPOINT_URL", "STORAGE_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)
    for name, value in emulated.environment.items():
        monkeypatch.setenv(name, value)
    source = tmp_path / "source"
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    write_deltalake(source, rows)
    write_deltalake(source, pa.table({"id": pa.array([4], pa.int64()), "v": ["d"]}), mode="append")
    emulated.upload(source, emulated.location)
    field = {StoreKind.S3: "object_store", StoreKind.AZURE: "azure_store", StoreKind.GCS: "gcs_store"}[emulated.kind]
    spec = RemoteTableSpec(name="e2e.s.t", location=emulated.location, access_modes=("dir",))
    server = start_server(
        tmp_path / "provider", remote_tables=(spec,), credentials_role_arn=emulated.role, **{field: emulated.server}
    )
    workspace = Workspace(tmp_path, server)
    try:
        results = workspace.syncer(workspace.config(workspace.spec("t", "merge"))).sync_all()
        assert [r.error for r in results] == [None]
        got = read_rows(DeltaTable(workspace.target("t"))).sort_by("id")
        assert got.select(["id", "v"]).to_pylist() == read_rows(DeltaTable(source)).sort_by("id").to_pylist()
    finally:
        workspace.close()


def test_targets_in_s3_are_located_through_aws_endpoint_url_s3(
    s3_server: S3Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyarrow (staging, target checks) reaches the store deltalake and Sail find through the same
    variable (both honour AWS_ENDPOINT_URL_S3 themselves); before, pyarrow went to AWS."""
    from sharesync.sync.core.location import locate

    options = s3_server.options()
    uri = f"{s3_server.prefix()}/target"
    write_deltalake(uri, pa.table({"id": [1]}), storage_options=options)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server.endpoint)
    for name in ("AWS_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, options[name])
    assert locate(uri).join("_delta_log").kind() == "directory"
