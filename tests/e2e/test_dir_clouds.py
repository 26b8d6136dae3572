"""Directory-based access on Azure and GCS: tables shared from azurite and fake-gcs-server.

The provider's tables are written by Sail on disk (:mod:`support.feature_tables`: deletion
vectors, column mapping) and copied into the emulator with pyarrow's own client; ``sharesync
serve`` (in process) shares them from there as dir-only or url+dir tables, and answers Generate
Temporary Table Credential with credentials that expire after ``TTL`` seconds:

* Azure: ``azureUserDelegationSas`` — a read/list SAS of the container that it signs with the
  account key (azurite has no Azure AD to issue a user-delegation key; the reader cannot tell the
  two kinds apart, see :mod:`sharesync.sync.server.credentials`). azurite checks every SAS, its
  expiry included, so a reader that used one past its end would fail here.
* GCS: ``gcpOauthToken`` — an opaque token, sent by the reader as a bearer header on the
  emulator's JSON API (fake-gcs-server checks no token; which token was sent is the unit tests').

Every target must equal the source at its checkpoint, read with Sail. S3 is tests/e2e/test_dir_access.py.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from support.azurite import ACCOUNT, KEY, AzuriteStore, azurite_store
from support.e2e import Workspace
from support.faults import SharingServer
from support.feature_tables import (
    assert_mode_matches,
    commit,
    create_source,
    latest_version,
)
from support.gcs import gcs_store
from support.spark import get_spark

from sharesync.state import open_store
from sharesync.sync.core.remote_table import Keys, RemoteTable
from sharesync.sync.core.storage import StoreSettings
from sharesync.sync.server.settings import RemoteTableSpec

pytestmark = pytest.mark.slow

TTL = 2.0  # seconds: credentials expire between and during batches (renewed at half their life, or on 403)

# name: (deletion vectors, column mapping, mode, access modes offered, access setting)
TABLES = {
    "m": (True, True, "merge", ("dir",), "auto"),
    "a": (True, False, "append", ("dir",), "dir"),
    "s": (False, True, "snapshot", ("url", "dir"), "dir"),
}


@dataclass(frozen=True)
class Cloud:
    """One emulated store: where tables go, how the test copies them there, how both sides reach it."""

    prefix: Callable[[], str]
    upload: Callable[[Path, str], None]
    server: dict[str, StoreSettings]  # the sharing server's own keys (azure_store / gcs_store)
    provider_storage: dict[str, dict[str, object]]  # the recipient's endpoint per prefix


@pytest.fixture(scope="module")
def azurite() -> Iterator[AzuriteStore]:
    with azurite_store() as store:
        yield store


@pytest.fixture(scope="module", params=["azure", "gcs"])
def cloud(request: pytest.FixtureRequest) -> Iterator[Cloud]:
    if request.param == "azure":
        store = request.getfixturevalue("azurite")
        own = StoreSettings(account_name=ACCOUNT, account_key=KEY, endpoint=store.endpoint, allow_http=True)  # type: ignore[arg-type]
        endpoint = {f"{store.root}/": {"endpoint": store.endpoint, "allow_http": True}}
        yield Cloud(store.prefix, partial(_upload, store), {"azure_store": own}, endpoint)
        return
    with gcs_store() as gcs:
        own = StoreSettings(endpoint=gcs.endpoint, allow_http=True)
        endpoint = {f"{gcs.root}/": {"endpoint": gcs.endpoint, "allow_http": True}}
        yield Cloud(gcs.prefix, gcs.upload, {"gcs_store": own}, endpoint)


def _upload(store: AzuriteStore, directory: Path, uri: str) -> None:
    """Copy a table directory a writer made on disk into azurite (pyarrow's filesystem, not sharesync's)."""
    target = store._filesystem()  # noqa: SLF001 - the test store's own client
    path = uri.removeprefix(f"{store.root}/")
    for file in sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.endswith(".crc")):
        with target.open_output_stream(f"lake/{path}/{file.relative_to(directory).as_posix()}") as out:
            out.write(file.read_bytes())


def test_every_mode_reads_dir_tables_with_expiring_credentials(
    tmp_path: Path, start_server: Callable[..., SharingServer], cloud: Cloud, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    spark = get_spark()
    base = cloud.prefix()
    remote = tuple(
        RemoteTableSpec(name=f"e2e.s.{name}", location=f"{base}/{name}", access_modes=modes)
        for name, (*_, modes, _setting) in TABLES.items()
    )
    server = start_server(tmp_path / "provider", remote_tables=remote, credential_ttl_seconds=TTL, **cloud.server)
    workspace = Workspace(tmp_path, server)
    sources = {name: tmp_path / "sources" / name for name in TABLES}
    for seed, (name, (dvs, mapping, *_)) in enumerate(TABLES.items()):
        create_source(spark, sources[name], dvs=dvs, mapping=mapping, partitioned=name != "a", seed=seed)
        cloud.upload(sources[name], f"{base}/{name}")
    specs = [
        workspace.spec(name, mode, access=setting, download_concurrency=2, max_versions_per_batch=1)
        for name, (_dv, _cm, mode, _modes, setting) in TABLES.items()
    ]
    config = workspace.config(*specs, provider_storage=cloud.provider_storage)
    state = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")
    bootstrap: dict[str, int] = {}
    try:
        for round_ in range(2):
            if round_:
                for offset, name in enumerate(TABLES):
                    commit(spark, sources[name], random.Random(100 * round_ + offset), 3)
                    cloud.upload(sources[name], f"{base}/{name}")
            results = workspace.syncer(config).sync_all()
            assert all(r.error is None for r in results), [r.error for r in results]
            for name, (_dv, _cm, mode, *_) in TABLES.items():
                version = latest_version(sources[name])
                checkpoint = state.get_checkpoint(workspace.name(name))
                assert checkpoint is not None and checkpoint.version == version, (round_, name, checkpoint)
                bootstrap.setdefault(name, version)
                assert_mode_matches(spark, sources[name], workspace.target(name), mode, bootstrap[name], version)
        # Each table asks for its own SAS on each pass (more when one was renewed at half life: how
        # many depends on the machine's speed; the renewal rule is tests/pipelines/test_directory.py,
        # a refused SAS renewed is the last test here).
        assert server.credentials_issued >= 2 * len(TABLES)
        issued = {secret for secrets in server.issued_credentials() for secret in secrets}
        assert caplog.text and not any(secret in caplog.text for secret in issued)  # URLs logged, secrets masked
    finally:
        workspace.close()


def test_an_expired_sas_is_refused_by_azurite(azurite: AzuriteStore) -> None:
    """The emulator enforces the SAS's expiry: what makes the renewal above necessary."""
    from datetime import UTC, datetime, timedelta

    from azure.storage.blob import ContainerSasPermissions, generate_container_sas

    sas = generate_container_sas(
        ACCOUNT, "lake", account_key=KEY, permission=ContainerSasPermissions(read=True, list=True),
        expiry=datetime.now(UTC) - timedelta(seconds=5),
    )  # fmt: skip
    authority = azurite.endpoint.removeprefix("http://").split("/")[0]
    fs = pafs.AzureFileSystem(
        ACCOUNT, sas_token=sas, blob_storage_authority=authority, dfs_storage_authority=authority,
        blob_storage_scheme="http", dfs_storage_scheme="http",
    )  # fmt: skip
    with pytest.raises(OSError):
        fs.get_file_info(pafs.FileSelector("lake/", allow_not_found=True))


class _Sas:
    """Key source handing out an expired SAS first, a valid one after :meth:`renew`."""

    def __init__(self, store: AzuriteStore) -> None:
        self.store, self.renewals = store, 0

    def __call__(self) -> Keys:
        from datetime import UTC, datetime, timedelta

        from azure.storage.blob import ContainerSasPermissions, generate_container_sas

        expiry = datetime.now(UTC) + timedelta(minutes=5 if self.renewals else -5)
        sas = generate_container_sas(
            ACCOUNT, "lake", account_key=KEY, permission=ContainerSasPermissions(read=True, list=True), expiry=expiry
        )
        settings = StoreSettings(endpoint=self.store.endpoint, allow_http=True, sas_token=sas)  # type: ignore[arg-type]
        return Keys(settings, int(expiry.timestamp() * 1000))

    def renew(self) -> None:
        self.renewals += 1


def test_a_refused_sas_is_renewed_once_to_read_the_log(azurite: AzuriteStore, tmp_path: Path) -> None:
    location = f"{azurite.prefix()}/t"
    (tmp_path / "src" / "_delta_log").mkdir(parents=True)
    (tmp_path / "src" / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    _upload(azurite, tmp_path / "src", location)
    keys = _Sas(azurite)
    RemoteTable(location, keys).mirror_log(tmp_path / "mirror")
    assert keys.renewals == 1 and (tmp_path / "mirror" / "_delta_log" / "00000000000000000000.json").is_file()
