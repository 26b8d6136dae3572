"""Which file URLs a provider may make sharesync fetch: the rule as a pure function, then in the downloader.

No test here connects anywhere: the rule is judged on URLs, and the downloader's requests go
to an ``httpx.MockTransport`` that records what would have been sent.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from sharesync.sync.core.errors import UnsafeUrl
from sharesync.sync.protocol.addresses import FileUrlPolicy, non_public_kind
from sharesync.sync.protocol.download import Downloader, DownloadOptions
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.wire import File

PROVIDER = "http://127.0.0.1:8080/delta-sharing"
POLICY = FileUrlPolicy(PROVIDER)


@pytest.mark.parametrize(
    ("host", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("[::1]", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: judged as the IPv4 address
        ("localhost", "loopback"),
        ("LOCALHOST.", "loopback"),
        ("metadata.localhost", "loopback"),  # RFC 6761: every *.localhost name is loopback
        ("169.254.169.254", "link-local"),  # AWS, GCP, Azure instance metadata
        ("[fe80::1]", "link-local"),
        ("fe80::1%eth0", "link-local"),
        ("[fd00:ec2::254]", "private"),  # AWS metadata over IPv6 (unique local)
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "non-global"),  # carrier-grade NAT, shared address space
        ("0.0.0.0", "unspecified"),
        ("[::]", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("8.8.8.8", None),
        ("[2001:4860:4860::8888]", None),
        ("bucket.s3.amazonaws.com", None),  # names are judged as written, never resolved
    ],
)
def test_each_address_is_classified(host: str, kind: str | None) -> None:
    assert non_public_kind(host) == kind


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/delta-sharing/files/t/a.parquet?sig=x",  # the provider's own origin
        "HTTP://127.0.0.1:8080/other/path",  # scheme and host compare case-insensitively
        "https://bucket.s3.amazonaws.com/t/a.parquet?X-Amz-Signature=s",
        "https://52.216.0.1/t/a.parquet",
        "https://[2600:1f18::1]:9000/t/a.parquet",
    ],
)
def test_the_providers_origin_and_public_hosts_are_allowed(url: str) -> None:
    assert POLICY.refusal(url) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:9999/latest/meta-data/", "127.0.0.1:9999, a loopback address"),
        ("https://127.0.0.1:8080/delta-sharing/files/a", "127.0.0.1:8080, a loopback address"),  # another scheme
        ("http://localhost:8080/files/a", "localhost:8080, a loopback address"),  # the same place, another origin
        ("http://169.254.169.254/latest/meta-data/iam/", "169.254.169.254:80, a link-local address"),
        ("http://[fd00:ec2::254]/latest/", "fd00:ec2::254:80, a private address"),
        ("http://10.1.2.3:8500/v1/kv/", "10.1.2.3:8500, a private address"),
        ("file:///etc/passwd", "its scheme is 'file'"),
        ("ftp://bucket.example.com/a", "its scheme is 'ftp'"),
        ("gopher://127.0.0.1:6379/_INFO", "its scheme is 'gopher'"),
    ],
)
def test_other_local_and_private_addresses_and_other_schemes_are_refused(url: str, why: str) -> None:
    reason = POLICY.refusal(url)
    assert reason is not None and why in reason
    if "scheme" not in why:
        assert "set 'allow_private_file_urls: true' in the config" in reason


def test_the_setting_allows_private_addresses_but_never_other_schemes() -> None:
    trusting = FileUrlPolicy(PROVIDER, allow_private=True)
    assert trusting.refusal("http://10.1.2.3:9000/bucket/a.parquet") is None
    assert trusting.refusal("http://127.0.0.1:9999/a") is None
    assert trusting.refusal("file:///etc/passwd") is not None


def test_a_refusal_names_the_file_and_hides_the_signature() -> None:
    with pytest.raises(UnsafeUrl) as info:
        POLICY.check("http://169.254.169.254/x?X-Amz-Signature=secret", context="download file f1 (3 bytes)")
    assert str(info.value).startswith("download file f1 (3 bytes): refused the file URL the provider gave")
    assert "secret" not in str(info.value)


# ---------------------------------------------------------------- in the downloader: nothing is sent


def _file(url: str) -> File:
    return File(url=url, id="f1", size=4, partition_values={})


def test_a_refused_url_is_never_requested_nor_retried(tmp_path: Path) -> None:
    sent: list[httpx.URL] = []

    def storage(request: httpx.Request) -> httpx.Response:
        sent.append(request.url)
        return httpx.Response(200, content=b"PAR1")

    downloader = Downloader(tmp_path, policy=POLICY, options=DownloadOptions(transport=httpx.MockTransport(storage), retry=RetryPolicy()))
    with pytest.raises(UnsafeUrl, match="download file f1 .*169.254.169.254:80, a link-local address"):
        downloader.download([_file("http://169.254.169.254/latest/meta-data/")])
    assert sent == [] and list(tmp_path.iterdir()) == []


def test_a_redirect_to_a_refused_address_is_not_followed(tmp_path: Path) -> None:
    sent: list[httpx.URL] = []

    def storage(request: httpx.Request) -> httpx.Response:
        sent.append(request.url)
        return httpx.Response(302, headers={"Location": "http://127.0.0.1:9999/admin"})

    downloader = Downloader(tmp_path, policy=POLICY, options=DownloadOptions(transport=httpx.MockTransport(storage), retry=RetryPolicy()))
    with pytest.raises(UnsafeUrl, match="a redirect of one.*127.0.0.1:9999, a loopback address"):
        downloader.download([_file("https://bucket.s3.amazonaws.com/a.parquet?X-Amz-Signature=s")])
    assert [str(u) for u in sent] == ["https://bucket.s3.amazonaws.com/a.parquet?X-Amz-Signature=s"]


def test_with_the_setting_a_private_storage_address_is_fetched(tmp_path: Path) -> None:
    def storage(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"PAR1")

    trusting = FileUrlPolicy(PROVIDER, allow_private=True)
    downloader = Downloader(tmp_path, policy=trusting, options=DownloadOptions(transport=httpx.MockTransport(storage)))
    result = downloader.download([_file("http://10.1.2.3:9000/bucket/a.parquet")])
    assert result.files[0].path.read_bytes() == b"PAR1"


@pytest.mark.parametrize(
    ("host", "port", "addresses", "why"),
    [
        ("files.example.com", 443, ["93.184.215.14"], None),
        ("files.example.com", 443, ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"], None),
        ("files.example.com", 8081, ["127.0.0.1"], "127.0.0.1, a loopback address"),
        ("files.example.com", 443, ["::ffff:169.254.169.254"], "::ffff:169.254.169.254, a link-local address"),
        ("files.example.com", 443, ["93.184.215.14", "10.0.0.9"], "10.0.0.9, a private address"),
        ("127.0.0.1", 8080, ["127.0.0.1"], None),  # the provider's own endpoint
    ],
)
def test_the_addresses_a_name_resolves_to_are_judged_like_written_ones(
    host: str, port: int, addresses: list[str], why: str | None
) -> None:
    refusal = POLICY.address_refusal(host, port, addresses)
    assert (refusal is None) if why is None else (f"its host {host} resolves to {why}" in (refusal or ""))
    assert FileUrlPolicy(PROVIDER, allow_private=True).address_refusal(host, port, addresses) is None
