"""File URLs whose host *name* resolves to a loopback, link-local or private address are refused before
any connection (:mod:`sharesync.sync.protocol.checked_connect`): the name is resolved once, by a fake
resolver injected into the downloader, each address is checked, and the connection goes to the checked
address — while TLS still verifies the name (SNI and the certificate's names), never the address.

Every connection stays on loopback: the fake resolver maps made-up names to 127.0.0.1, and the
addresses that must be refused are never connected to at all.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.faults import SharingServer
from support.tls import make_tls_files

from sharesync.sync.core.errors import ConfigError, UnsafeUrl
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.download import Downloader, DownloadOptions
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.retry import RetryPolicy

TABLE = "samples.all_types.partitioned"
ONCE = RetryPolicy(max_attempts=1)


class FakeResolver:
    """Answers names from a table, and records each question: one per connection, never two."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return self.answers[host]


@pytest.fixture
def forbidden_port() -> Iterator[socket.socket]:
    """A loopback listener standing for a service only this host can reach: it must never see a connection."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.setblocking(False)
    yield listener
    listener.close()


@pytest.mark.parametrize(
    ("addresses", "refused"),
    [
        (["127.0.0.1"], "127.0.0.1, a loopback address"),
        (["169.254.169.254"], "169.254.169.254, a link-local address"),
        (["10.1.2.3"], "10.1.2.3, a private address"),
        (["93.184.215.14", "192.168.0.7"], "192.168.0.7, a private address"),  # one bad answer is enough
    ],
)
def test_a_name_resolving_to_a_non_public_address_is_refused_before_connecting(
    sharing_server: SharingServer,
    forbidden_port: socket.socket,
    tmp_path: Path,
    addresses: list[str],
    refused: str,
) -> None:
    port = forbidden_port.getsockname()[1]
    sharing_server.faults.file_url_origin = f"http://files.example.com:{port}"
    resolver = FakeResolver({"files.example.com": addresses})
    with SharingClient(load_profile(sharing_server.profile_path), retry=ONCE) as client:  # type: ignore[arg-type]
        files = list(client.query(TABLE).files)[:2]
        downloader = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=ONCE, resolver=resolver))
    assert client.file_url_policy.refusal(files[0].url) is None, "the URL as written must pass: the test proves nothing"

    with pytest.raises(UnsafeUrl) as caught:
        downloader.download(files)
    message = str(caught.value)
    assert message.startswith("download file ") and f"its host files.example.com resolves to {refused}" in message
    assert "set 'allow_private_file_urls: true' in the config" in message
    assert ("files.example.com", port) in resolver.asked
    with pytest.raises(BlockingIOError):  # no connection is waiting: nothing ever connected
        forbidden_port.accept()
    assert list(tmp_path.iterdir()) == []


def test_allow_private_file_urls_connects_to_the_resolved_address(
    sharing_server: SharingServer, tmp_path: Path
) -> None:
    """The name is resolved once and the connection goes to that answer: no system resolver knows this name."""
    sharing_server.faults.file_url_origin = sharing_server.base_url.replace("127.0.0.1", "files.sharesync.test")
    resolver = FakeResolver({"files.sharesync.test": ["127.0.0.1"]})
    profile = load_profile(sharing_server.profile_path)  # type: ignore[arg-type]
    with SharingClient(profile, retry=ONCE, allow_private_file_urls=True) as client:
        files = list(client.query(TABLE).files)[:1]
        result = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=ONCE, resolver=resolver)).download(files)
    assert [d.path.stat().st_size for d in result.files] == [files[0].size]
    assert resolver.asked == [("files.sharesync.test", sharing_server.port)]


@pytest.fixture
def tls_server(
    tmp_path: Path, provider_root: Path, start_server: Callable[..., SharingServer]
) -> tuple[SharingServer, Path]:
    """The sharing server over HTTPS, its certificate (from a throwaway CA) naming files.sharesync.test
    and 127.0.0.1 — but not elsewhere.sharesync.test."""
    tls = make_tls_files(tmp_path / "tls", names=("files.sharesync.test",))
    return start_server(provider_root, ssl_certfile=tls.cert, ssl_keyfile=tls.key), tls.ca


def _download_from(host: str, server: SharingServer, ca: Path, tmp_path: Path) -> FakeResolver:
    """Download one file with its URL (and the provider's endpoint) at ``host``, which resolves to 127.0.0.1."""
    origin = f"https://{host}:{server.port}"
    server.faults.file_url_origin = origin
    resolver = FakeResolver({host: ["127.0.0.1"]})
    with SharingClient(load_profile(server.profile_path), retry=ONCE, ca_bundle=ca) as client:  # type: ignore[arg-type]
        files = list(client.query(TABLE).files)[:1]
    policy = FileUrlPolicy(f"{origin}/delta-sharing")  # a provider at a host name, serving its own files
    Downloader(tmp_path, policy=policy, options=DownloadOptions(retry=ONCE, ca_bundle=ca, resolver=resolver)).download(files)
    return resolver


def test_tls_verifies_the_host_name_not_the_address_it_resolved_to(
    tls_server: tuple[SharingServer, Path], tmp_path: Path
) -> None:
    server, ca = tls_server
    resolver = _download_from("files.sharesync.test", server, ca, tmp_path / "named")
    assert resolver.asked == [("files.sharesync.test", server.port)]
    assert len(list((tmp_path / "named").iterdir())) == 1

    # The certificate names 127.0.0.1, the address connected to, but not this name: refused, so the
    # name (not the address) is what TLS checked.
    with pytest.raises(ConfigError, match="the server's TLS certificate was not accepted"):
        _download_from("elsewhere.sharesync.test", server, ca, tmp_path / "unnamed")
    assert list((tmp_path / "unnamed").iterdir()) == []
