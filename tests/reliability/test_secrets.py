"""No secret ever reaches a person's screen, a log, the state store or Dagster's event log.

Secrets: the profile's bearer token (and a wrong one a user configured), the OAuth client
secret and the access tokens the token endpoint hands out, and presigned URL signatures
(``sig=<hmac>`` on the local server, like ``X-Amz-Signature`` on S3). With logging at DEBUG
(httpx logs every URL it fetches), full syncs and failing syncs run three ways — the real
command in subprocesses (``-vv``), the syncer in-process, and Dagster materializations — and
every text they leave is scanned: stdout, stderr, log records with their tracebacks,
exception texts (with their chained causes), every row of the state store and every stored
Dagster event. Controls prove the scan would see a secret if one were there. The same holds for
the secret key of the ``storage:`` section (targets and staging in moto's S3 server).
"""

from __future__ import annotations

import logging
import re
import sqlite3
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pytest
from support.reliability import Site
from support.s3 import S3Store

from sharesync.pipelines.dagster.code_location import build_definitions
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.sync.core.config import load_config

pytestmark = pytest.mark.slow

WRONG_TOKEN = "wrong-token-4242-must-never-show"  # noqa: S105 - a test value
SIGNATURE = re.compile(r"sig=[0-9a-f]{8,}|[0-9a-f]{64}")  # the local server's HMAC-SHA256 signatures


def _secrets(site: Site) -> list[str]:
    settings = site.server.settings
    assert settings.bearer_token is not None
    return [settings.bearer_token, settings.oauth_client_secret, WRONG_TOKEN, *site.server.issued_access_tokens()]


def _leaks(texts: Iterable[str], secrets: list[str]) -> list[str]:
    found = []
    for text in texts:
        found += [f"secret {s[:4]}…" for s in secrets if s in text]
        found += [f"signature {m.group(0)[:12]}…" for m in SIGNATURE.finditer(text)]
    return found


class Collect(logging.Handler):
    """Every record of every logger, formatted with its traceback, as a handler would write it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))


@contextmanager
def debug_logs() -> Iterator[Collect]:
    handler = Collect()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _state_rows(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"')]  # noqa: S608


def _exception_texts(results: Iterable[Any]) -> list[str]:
    texts = []
    for result in results:
        texts += [repr(result), str(result.error)]
        if result.exception is not None:
            texts.append("".join(traceback.format_exception(result.exception)))
            cause = result.exception
            while cause is not None:  # including contexts a traceback would hide
                texts.append(repr(cause))
                cause = cause.__cause__ or cause.__context__
    return texts


def test_no_secret_in_outputs_logs_exceptions_state_or_dagster_events(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site.table("m", rows=20, seed=1)
    site.table("a", rows=20, seed=2)
    specs = (site.spec("m"), site.spec("a", "append"))
    oauth = site.server.write_profile(tmp_path / "oauth.share", oauth=True)
    wrong = site.root / "wrong.share"
    wrong.write_text(
        f'{{"shareCredentialsVersion": 1, "endpoint": "{site.server.endpoint}", "bearerToken": "{WRONG_TOKEN}"}}',
        encoding="utf-8",
    )
    texts: list[str] = []
    faults = site.server.faults

    # 1. The real command, -vv (DEBUG on stderr): a full sync with the bearer profile, then with
    #    the OAuth profile; failing syncs: a wrong token, downloads that keep failing.
    def run(profile: Path | None, **env: str) -> None:
        site.write_raw(site.raw_config(*specs, profile=profile))
        for command in (["-vv", "sync"], ["-vv", "status"]):
            done = site.run_cli(*command, **env)
            texts.extend([done.stdout, done.stderr])

    run(None)
    site.commit("m", 2, seed=3)
    site.commit("a", 2, seed=4)
    run(oauth)
    run(wrong)
    site.commit("m", 2, seed=5)
    site.commit("a", 2, seed=6)
    faults.file_size_delta = 3
    run(oauth, SHARESYNC_RETRY_MAX_ATTEMPTS="1")
    faults.file_size_delta = 0
    assert "HTTP 401" in "".join(texts) and "declared size" in "".join(texts), "the failures did not happen"
    assert "HTTP Request: GET" in "".join(texts), "DEBUG logging of requests was not on"

    # 2. The syncer in-process with every logger at DEBUG: records, results and exceptions.
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "1")
    with debug_logs() as logs:
        for profile in (oauth, wrong):
            site.write_raw(site.raw_config(*specs, profile=profile))
            faults.drop_file_connection = profile == oauth  # downloads break half way: a failing sync
            site.commit("m", 1, seed=7)
            syncer = site.syncer(load_config(site.config_file))
            texts += _exception_texts(syncer.sync_all())
        faults.drop_file_connection = False
    texts += logs.texts

    # 3. Dagster: a materialization that succeeds and one that fails, their stored events.
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        for profile, size_delta in ((oauth, 0), (oauth, 5)):
            config_file = site.write_raw(site.raw_config(*specs, profile=profile))
            faults.file_size_delta = size_delta
            site.commit("m", 1, seed=8 + size_delta)
            resource = SharesyncResource(config_path=str(config_file))
            # One quick retry (the production policy waits 30 s and more between attempts).
            defs = build_definitions(load_config(config_file), resource, retry_policy=dg.RetryPolicy(max_retries=1))
            result = dg.materialize(
                [*(defs.assets or ())],  # type: ignore[list-item]
                resources=dict(defs.resources or {}),
                instance=instance,
                raise_on_error=False,
            )
            assert result.success is (size_delta == 0)
            texts += [dg.serialize_value(record) for record in instance.all_logs(result.run_id)]
    faults.file_size_delta = 0

    # 4. Every row of the state store.
    texts += _state_rows(site.state_db)

    secrets = _secrets(site)
    assert len(secrets) > 3, "the OAuth token endpoint was never used"
    assert _leaks(texts, secrets) == []

    # Controls: file URLs were logged (redacted), and the same scan sees each kind of secret
    # where it really is.
    assert any("/files/" in t and "?***" in t for t in logs.texts), "no file URL was logged"
    query = httpx.post(
        f"{site.server.endpoint}/shares/rel/schemas/s/tables/m/query",
        headers={"Authorization": f"Bearer {site.server.token}"},
        json={},
    ).text
    assert any(leak.startswith("signature") for leak in _leaks([query], secrets))
    assert _leaks([oauth.read_text(), wrong.read_text()], secrets)


WRONG_STORAGE_SECRET = "wrong-storage-secret-7373-must-never-show"  # noqa: S105 - a test value


def test_no_storage_secret_in_outputs_logs_exceptions_state_or_dagster_events(
    site: Site, s3_server: S3Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``storage:`` secret comes from an environment variable (``${…}``); a wrong one is
    written in the file. Neither may show, whether the sync succeeds or the store refuses it."""
    site.table("m", rows=20, seed=1)
    prefix = s3_server.prefix()
    spec = site.spec("m", target=f"{prefix}/m")
    env = {"LAKE_SECRET": s3_server.secret_access_key}
    monkeypatch.setenv("LAKE_SECRET", s3_server.secret_access_key)
    good = site.raw_config(
        spec, staging_dir=f"{prefix}/staging", storage=s3_server.storage(secret_access_key="${LAKE_SECRET}")
    )
    wrong = {**good, "storage": s3_server.storage(secret_access_key=WRONG_STORAGE_SECRET)}
    texts: list[str] = []

    # 1. The real command, -vv: a sync that works, then one the store refuses.
    for raw in (good, wrong):
        site.write_raw(raw)
        for command in (["-vv", "sync"], ["-vv", "status"]):
            done = site.run_cli(*command, **env)
            texts.extend([done.stdout, done.stderr])
    assert "rejects the credentials" in "".join(texts), "the refused sync did not happen"
    site.commit("m", 2, seed=3)

    # 2. In-process with every logger at DEBUG: records, results and exceptions.
    with debug_logs() as logs:
        for raw in (good, wrong):
            syncer = site.syncer(load_config(site.write_raw(raw)))
            texts += _exception_texts(syncer.sync_all())
            texts.append(repr(syncer.config))
    texts += logs.texts

    # 3. Dagster: a materialization that succeeds and one the store refuses.
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        for raw in (good, wrong):
            site.commit("m", 1, seed=len(texts))
            config_file = site.write_raw(raw)
            resource = SharesyncResource(config_path=str(config_file))
            defs = build_definitions(load_config(config_file), resource, retry_policy=dg.RetryPolicy(max_retries=0))
            result = dg.materialize(
                [*(defs.assets or ())],  # type: ignore[list-item]
                resources=dict(defs.resources or {}),
                instance=instance,
                raise_on_error=False,
            )
            assert result.success is (raw is good)
            texts += [dg.serialize_value(record) for record in instance.all_logs(result.run_id)]

    texts += _state_rows(site.state_db)
    secrets = [s3_server.secret_access_key, WRONG_STORAGE_SECRET]
    assert _leaks(texts, secrets) == []
    # Control: the scan sees the secret where it really is.
    assert _leaks([site.config_file.read_text(encoding="utf-8")], secrets)


def test_no_temporary_credential_in_logs_exceptions_state_staged_files_or_dagster_events(
    tmp_path: Path, start_server: Any, open_s3_server: tuple[S3Store, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Directory-based access: the provider's temporary AWS credentials (an STS session per
    answer, renewed every second here) never show, whether the sync succeeds or its files are gone."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from support.e2e import Workspace

    from sharesync.sync.core.remote_table import Keys, RemoteTable
    from sharesync.sync.core.storage import StoreSettings
    from sharesync.sync.server.settings import RemoteTableSpec

    store, role = open_s3_server
    base = store.prefix()
    write_deltalake(f"{base}/d", pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}), storage_options=store.options())
    server = start_server(
        tmp_path / "provider",
        remote_tables=(RemoteTableSpec(name="e2e.s.d", location=f"{base}/d", access_modes=("dir",)),),
        object_store=StoreSettings.model_validate(store.settings()),
        credentials_role_arn=role,
        credential_ttl_seconds=2,
    )
    workspace = Workspace(tmp_path, server)
    endpoint = {f"s3://{store.bucket}/": {"endpoint": store.endpoint, "region": store.region, "allow_http": True}}
    config = workspace.config(workspace.spec("d"), provider_storage=endpoint)
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "1")
    texts: list[str] = []
    try:
        with debug_logs() as logs:
            texts += _exception_texts(workspace.syncer(config).sync_all())  # succeeds
            write_deltalake(
                f"{base}/d", pa.table({"id": [4], "v": ["d"]}), mode="append", storage_options=store.options()
            )
            newest = [k for k in store.keys(f"{base}/d") if k.endswith(".parquet")]
            store.client("s3").delete_objects(Bucket=store.bucket, Delete={"Objects": [{"Key": k} for k in newest]})
            failed = workspace.syncer(config).sync_all()  # the files are gone: 404 from the store
            assert failed[0].error is not None
            texts += _exception_texts(failed)
        texts += logs.texts
        (tmp_path / "dagster").mkdir()
        with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
            resource = SharesyncResource(config_path=str(workspace.config_file))
            defs = build_definitions(config, resource, retry_policy=dg.RetryPolicy(max_retries=0))
            result = dg.materialize(
                [*(defs.assets or ())],  # type: ignore[list-item]
                resources=dict(defs.resources or {}),
                instance=instance,
                raise_on_error=False,
            )
            texts += [dg.serialize_value(record) for record in instance.all_logs(result.run_id)]
    finally:
        workspace.close()
    texts += _state_rows(workspace.root / "state" / "state.db")
    staged = [p for p in (workspace.root / "staging").rglob("*") if p.is_file()]
    texts += [p.read_bytes().decode("latin-1") for p in staged]
    secrets = [s for issued in server.issued_credentials() for s in issued]
    assert len(server.issued_credentials()) >= 3, "the credentials were not asked for on every run"
    assert any("X-Amz-Signature" not in t and "?***" in t for t in logs.texts), "no presigned URL was logged"
    # The store's content hashes (x-amz-content-sha256) are 64 hex digits too: look for SigV4 signatures.
    signatures = re.compile(r"Signature=[0-9a-f]{64}")
    assert [s[:4] for s in secrets if any(s in t for t in texts)] == []
    assert [m.group(0)[:16] for t in texts for m in signatures.finditer(t)] == []
    # Control: the scan sees a presigned URL's signature where it really is.
    assert signatures.search(
        RemoteTable(f"{base}/d", lambda: Keys(StoreSettings.model_validate(store.settings()))).presign("x", 60, 0)[0]
    )
