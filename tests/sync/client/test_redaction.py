"""A whole session of calls, failures included: the bearer token and URL signatures reach no log and no message."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from support.faults import SharingServer

from sharesync.sync.core.errors import SharesyncError, UrlExpired
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.download import Downloader, DownloadOptions
from sharesync.sync.protocol.profile import load_profile, parse_profile
from sharesync.sync.protocol.refresh import refresher_for
from sharesync.sync.protocol.retry import RetryPolicy

FAST = RetryPolicy(max_attempts=3, total_seconds=5.0, initial_backoff=0.01, max_backoff=0.02)
TABLE = "samples.all_types.partitioned"


def test_tokens_and_signatures_never_reach_logs_or_messages(
    sharing_server: SharingServer, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)  # root: sharesync, httpx and httpcore records alike
    for name in ("httpx", "httpcore", "sync"):
        caplog.set_level(logging.DEBUG, logger=name)
    assert sharing_server.profile_path is not None
    wrong_token = "wrong-bearer-token-5f2e9a"
    messages: list[str] = []
    urls: list[str] = []

    def failing(call: object) -> None:
        with pytest.raises(SharesyncError) as info:
            call()  # type: ignore[operator]
        messages.append(str(info.value))
        messages.append("".join(traceback.format_exception(info.value)))

    faults = sharing_server.faults
    with SharingClient(load_profile(sharing_server.profile_path), retry=FAST) as client:
        client.list_shares(max_results=1)
        client.metadata(TABLE)
        client.table_version(TABLE)
        snapshot = client.query(TABLE, max_files=1)
        changes = client.changes(TABLE, starting_version=0, max_files=2)
        urls += [f.url for f in snapshot.files] + [f.url for f in changes.files]
        messages += [repr(snapshot), repr(changes), repr(client), repr(list(snapshot.files))]

        # downloads, with one URL refresh on the way
        faults.url_ttl_seconds = 5
        fresh = client.query(TABLE)
        urls += [f.url for f in fresh.files]
        sharing_server.clock.advance(60)
        done = Downloader(tmp_path / "a", policy=client.file_url_policy, options=DownloadOptions(retry=FAST)).download(
            list(fresh.files), refresher=refresher_for(client, fresh)
        )
        assert done.stats.url_refreshes == 1
        stale = client.query(TABLE, version=1)
        urls += [f.url for f in stale.files]
        sharing_server.clock.advance(60)
        with pytest.raises(UrlExpired) as expired:
            Downloader(tmp_path / "b", policy=client.file_url_policy, options=DownloadOptions(retry=FAST)).download(list(stale.files))
        messages += [str(expired.value), "".join(traceback.format_exception(expired.value))]

        # failures: unknown table, retried 503s, truncated then broken streams
        failing(lambda: client.metadata("samples.all_types.nope"))
        faults.error_rate, faults.retry_after = 1.0, 0
        failing(lambda: client.list_shares())
        faults.error_rate = 0.0
        faults.drop_end_stream_action = True
        failing(lambda: client.query(TABLE))
        faults.drop_end_stream_action = False
        faults.end_stream_error = "failed while streaming"
        failing(lambda: client.changes(TABLE, starting_version=0))
        faults.end_stream_error = None

    with SharingClient(parse_profile({**sharing_server.profile(), "bearerToken": wrong_token}), retry=FAST) as other:
        failing(lambda: other.list_shares())

    signatures = {
        value
        for url in urls
        for key, values in parse_qs(urlsplit(url).query).items()
        for value in values
        if key == "sig"
    }
    assert len(signatures) >= 5
    secrets = {sharing_server.token, wrong_token, *signatures}
    logged = [r.getMessage() + "\n" + (r.exc_text or "") for r in caplog.records]
    everything = "\n".join(logged + messages)
    leaked = sorted(s for s in secrets if s in everything)
    assert leaked == []
    # The test sees what could leak: httpx logged the file URLs (redacted) and httpcore its traffic.
    assert any(r.name == "httpx" and "/files/" in r.getMessage() and "?***" in r.getMessage() for r in caplog.records)
    assert any(r.name.startswith("httpcore") for r in caplog.records)
    assert any("Request has expired" in m for m in messages)


def test_presigned_urls_stay_out_of_reprs() -> None:
    """A repr reaches logs, assertion messages and tracebacks' locals."""
    from sharesync.sync.delta.properties import DeletionVectorDescriptor
    from sharesync.sync.protocol.refresh import Url

    signed = "https://bucket.example.com/f.parquet?X-Amz-Signature=sig-secret-42"
    for value in (Url(signed, 1.0, 2.0), DeletionVectorDescriptor("p", signed, 34, 1, 1)):
        assert "sig-secret-42" not in repr(value) and "sig-secret-42" not in str(value)


def test_a_spark_connect_token_is_masked_wherever_it_appears() -> None:
    """``spark.remote: sc://host:443/;token=…`` (deploy/README.md) names the engine in errors."""
    from sharesync.sync.core.config import SparkConfig
    from sharesync.sync.core.redact import redact

    url = "sc://workspace.example.com:443/;token=dapi-pat-0123456789;x-databricks-cluster-id=c1"
    SparkConfig(remote=url)
    said = redact(f"staging_dir: the Spark engine at {url} cannot read the probe file")
    assert "dapi-pat-0123456789" not in said and "workspace.example.com" in said
    assert "dapi-pat-0123456789" not in redact("grpc said: invalid token dapi-pat-0123456789")


def test_botocore_debug_records_are_withheld(caplog: pytest.LogCaptureFixture) -> None:
    """Directory access signs every file URL with botocore, whose DEBUG records hold the canonical
    request (with the session token) and the signature: they never reach a handler."""
    from pydantic import SecretStr

    from sharesync.sync.core.redact import install_log_redaction
    from sharesync.sync.core.remote_table import Keys, RemoteTable
    from sharesync.sync.core.storage import StoreSettings

    install_log_redaction()
    keys = StoreSettings(
        access_key_id=SecretStr("AKIA-test-0001"), secret_access_key=SecretStr("s3cret-0001"),
        session_token=SecretStr("session-token-0001"), region="eu-west-1",
    )  # fmt: skip
    with caplog.at_level(logging.DEBUG, logger="botocore"):
        url, expires = RemoteTable("s3://bucket/t", lambda: Keys(keys, 90_000)).presign("a%3Db/f.parquet", 3600, 0)
    assert url.startswith("https://bucket.s3.eu-west-1.amazonaws.com/t/a%3Db/f.parquet?") and expires == 90_000
    signature = parse_qs(urlsplit(url).query)["X-Amz-Signature"][0]
    assert parse_qs(urlsplit(url).query)["X-Amz-Expires"] == ["90"]  # never past the credentials' end
    texts = [r.getMessage() for r in caplog.records if r.name.startswith("botocore")]
    assert texts and all(t == "(botocore request details withheld)" for t in texts)
    assert signature not in caplog.text and "session-token-0001" not in caplog.text


def test_thousands_of_registered_secrets_stay_cheap_to_register_and_all_masked() -> None:
    """A long-running process registers new temporary credentials every hour per table. Each
    registration used to compile one regex of every secret so far: 1,500 session tokens took
    hours (the suite's timeout fails it); now each is a substring search."""
    import secrets as random_secrets

    from sharesync.sync.core.redact import redact, register_secret

    tokens = [f"tok{n:05}-{random_secrets.token_urlsafe(300)}" for n in range(1500)]
    for token in tokens:
        register_secret(token)
    assert redact(f"a {tokens[0]} b {tokens[-1]}.") == "a *** b ***."
    assert redact(f"x{tokens[7]}y") == "x***y"
