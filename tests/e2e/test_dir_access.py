"""Directory-based access end to end: tables shared from S3 with temporary credentials.

The provider's tables are written by Sail on disk (:mod:`support.feature_tables`: plain, deletion
vectors, column mapping) and copied into moto's bucket with boto3; ``sharesync serve`` shares them
from there (``remote_tables``) as dir-only or url+dir tables and issues STS session credentials
that expire after ``TTL`` seconds. sharesync reads the log and the files with those credentials;
every target must equal the source at its checkpoint, read with Sail. moto here runs with
authentication off: its S3 cannot check a presigned URL's signature with it on (see
:func:`support.s3.s3_store`), so the store does not enforce the credentials' expiry — the
renewal is observed on the server instead (credentials issued per sync).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from support.e2e import Workspace
from support.faults import SharingServer
from support.feature_tables import (
    assert_mode_matches,
    commit,
    create_source,
    latest_version,
)
from support.s3 import S3Store
from support.spark import get_spark

from sharesync.state import open_store
from sharesync.sync.core.storage import StoreSettings
from sharesync.sync.server.settings import RemoteTableSpec

TTL = 2.0  # seconds: credentials expire between and during batches (renewed at half their life)

# name: (deletion vectors, column mapping, mode, access modes offered, access setting)
TABLES = {
    "m": (True, True, "merge", ("dir",), "auto"),
    "p": (False, False, "merge", ("url", "dir"), "dir"),
    "a": (True, False, "append", ("dir",), "dir"),
    "s": (False, True, "snapshot", ("url", "dir"), "dir"),
    "h": (True, False, "history", ("dir",), "auto"),
}


def _serve(
    start_server: Callable[..., SharingServer], root: Path, store: S3Store, role: str, base: str
) -> SharingServer:
    own = StoreSettings.model_validate(store.settings())
    remote = tuple(
        RemoteTableSpec(name=f"e2e.s.{name}", location=f"{base}/{name}", access_modes=modes)
        for name, (*_, modes, _setting) in TABLES.items()
    )
    return start_server(
        root, remote_tables=remote, object_store=own, credentials_role_arn=role, credential_ttl_seconds=TTL
    )


def test_every_mode_reads_dir_tables_with_expiring_credentials(
    tmp_path: Path, start_server: Callable[..., SharingServer], open_s3_server: tuple[S3Store, str]
) -> None:
    store, role = open_s3_server
    spark = get_spark()
    source_root, base = tmp_path / "sources", store.prefix()
    server = _serve(start_server, tmp_path / "provider", store, role, base)
    workspace = Workspace(tmp_path, server)
    sources = {name: source_root / name for name in TABLES}
    for seed, (name, (dvs, mapping, *_)) in enumerate(TABLES.items()):
        create_source(spark, sources[name], dvs=dvs, mapping=mapping, partitioned=name != "a", seed=seed)
        store.upload(sources[name], f"{base}/{name}")
    specs = [
        workspace.spec(
            name,
            mode,
            access=setting,
            download_concurrency=2,
            max_versions_per_batch=1,
            **({"keys": ["id"]} if mode == "history" else {}),
        )
        for name, (_dv, _cm, mode, _modes, setting) in TABLES.items()
    ]
    provider_storage = {
        f"s3://{store.bucket}/": {"endpoint": store.endpoint, "region": store.region, "allow_http": True}
    }
    config = workspace.config(*specs, provider_storage=provider_storage)
    state = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")
    bootstrap: dict[str, int] = {}
    try:
        for round_ in range(3):
            if round_:
                for offset, name in enumerate(TABLES):
                    commit(spark, sources[name], random.Random(100 * round_ + offset), 3)
                    store.upload(sources[name], f"{base}/{name}")
            issued = server.credentials_issued
            results = workspace.syncer(config).sync_all()
            assert all(r.error is None for r in results), [r.error for r in results]
            assert server.credentials_issued - issued >= len(TABLES)  # each table asks for its own
            for name, (_dv, _cm, mode, *_) in TABLES.items():
                version = latest_version(sources[name])
                checkpoint = state.get_checkpoint(workspace.name(name))
                assert checkpoint is not None and checkpoint.version == version, (round_, name, checkpoint)
                bootstrap.setdefault(name, version)
                assert_mode_matches(spark, sources[name], workspace.target(name), mode, bootstrap[name], version)
        # Three one-version batches per table and round, each a Spark write: longer than the
        # credentials' half life, so some were renewed during a pass, and the targets stayed right.
        assert server.credentials_issued > 3 * len(TABLES), "no credentials were renewed during a pass"
    finally:
        workspace.close()
