"""Transport and file-system safety: TLS verified by default, downloads bounded, staging contained.

* An ``https://`` provider whose certificate no trusted authority signed is refused at once
  (no retries: a person has to decide), with a message that names ``ca_bundle``; with the
  authority in ``ca_bundle`` the same provider syncs — API calls, the OAuth token endpoint and
  the presigned file downloads all over verified TLS.
* A file body longer than its declared ``size`` is cut off after at most one chunk past it
  (never read to its end, never stored), and fails the download.
* Staging file names are built from provider-chosen file ids: whatever the id, the file lands
  inside the staging directory and nowhere else.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.cli_runner import CliResult
from support.faults import SharingServer
from support.reliability import Expectation, Site, assert_at_checkpoint, delta_version
from support.tls import make_tls_files

from sharesync.sync.core.errors import DownloadError
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.download import Downloader, DownloadOptions, staged_name
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.wire import AddFile, CdfFile, File, RemoveFile


@pytest.mark.slow
def test_tls_is_verified_by_default_and_a_ca_bundle_makes_a_private_authority_trusted(
    tmp_path: Path,
    start_server: Callable[..., SharingServer],
    cli: Callable[..., CliResult],
    caplog: pytest.LogCaptureFixture,
) -> None:
    tls = make_tls_files(tmp_path / "tls")
    provider = tmp_path / "provider"
    provider.mkdir()
    server = start_server(provider, ssl_certfile=tls.cert, ssl_keyfile=tls.key)
    assert server.endpoint.startswith("https://127.0.0.1:")
    site = Site(tmp_path, server)
    site.table("t", rows=20)
    expect = Expectation("t", "merge")

    config = site.write_raw(site.raw_config(site.spec("t")))
    with caplog.at_level(logging.INFO):
        refused = cli("--config", str(config), "sync")
    assert refused.code == 2, refused
    errors = [line for line in refused.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, refused.err
    assert "the server's TLS certificate was not accepted" in errors[0]
    assert "set 'ca_bundle' in the config" in errors[0]
    assert "attempt 2 of" not in caplog.text, "a certificate problem was retried"
    assert delta_version(site.target("t")) is None and site.checkpoint("t") is None

    # Trusting the authority: the bootstrap (API + file downloads over TLS) ...
    config = site.write_raw(site.raw_config(site.spec("t"), ca_bundle=str(tls.ca)))
    assert cli("--config", str(config), "sync").code == 0
    assert_at_checkpoint(site, expect)
    # ... and change batches with an OAuth profile, whose token endpoint is on the same TLS server.
    site.commit("t", 3, seed=1)
    oauth = server.write_profile(tmp_path / "oauth.share", oauth=True)
    config = site.write_raw(site.raw_config(site.spec("t"), ca_bundle=str(tls.ca), profile=oauth))
    synced = cli("--config", str(config), "sync")
    assert synced.code == 0, synced.out
    assert_at_checkpoint(site, expect)
    assert server.issued_access_tokens(), "the OAuth token endpoint was not used"


STORAGE = FileUrlPolicy("https://sharing.example/delta-sharing")  # its files are on public hosts


class EndlessBody(httpx.AsyncByteStream):
    """A file body that never ends, counting what was read of it."""

    def __init__(self, chunk: int) -> None:
        self.chunk, self.sent = chunk, 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < 1 << 30:  # 1 GiB, far more than anyone should read
            self.sent += self.chunk
            yield b"\0" * self.chunk


def test_a_body_longer_than_declared_is_cut_off_after_one_chunk(tmp_path: Path) -> None:
    body = EndlessBody(chunk=1024)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=body))
    declared = 10_000
    downloader = Downloader(tmp_path / "staging", policy=STORAGE, options=DownloadOptions(transport=transport, chunk_size=1024, retry=RetryPolicy(max_attempts=1)))
    with pytest.raises(DownloadError, match=f"file a \\({declared} bytes\\): the body is longer than the declared"):
        downloader.download([File(url="https://storage.example/a?sig=x", id="a", size=declared, partition_values={})])
    assert body.sent <= declared + 2 * 1024, f"read {body.sent} bytes of a {declared}-byte file"
    assert list((tmp_path / "staging").iterdir()) == []


HOSTILE_IDS = ["../../escape", "/etc/passwd", "..", "a/../../b", "..\\..\\win", "x\x00y", ".hidden", "~root", "a" * 300]


def test_hostile_file_ids_are_downloaded_inside_the_staging_directory(tmp_path: Path) -> None:
    def serve(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"PAR1")

    staging = tmp_path / "deep" / "er" / "staging"
    files = [
        File(url=f"https://storage.example/{i}?sig=x", id=fid, size=4, partition_values={})
        for i, fid in enumerate(HOSTILE_IDS)
    ]
    result = Downloader(staging, policy=STORAGE, options=DownloadOptions(transport=httpx.MockTransport(serve))).download(files)

    assert len({d.path for d in result.files}) == len(HOSTILE_IDS)
    assert all(d.path.parent == staging.resolve() for d in result.files)
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and staging not in p.parents]
    assert outside == [], outside


@settings(max_examples=300, deadline=None)
@given(
    file_id=st.text(min_size=0, max_size=200),
    kind=st.sampled_from([File, AddFile, CdfFile, RemoveFile]),
    version=st.integers(min_value=0, max_value=2**40),
)
def test_any_file_id_makes_a_plain_file_name(file_id: str, kind: type, version: int) -> None:
    extra = {} if kind is File else {"version": version, "timestamp": 0}
    name = staged_name(kind(url="https://x/y", id=file_id, size=1, partition_values={}, **extra))
    assert os.sep not in name and "/" not in name and "\\" not in name and "\x00" not in name
    assert name not in (".", "..") and not name.startswith(".") and len(name) < 160
    root = Path("/staging")
    assert os.path.normpath(root / name) == str(root / name)  # nothing to resolve: stays where it is put
