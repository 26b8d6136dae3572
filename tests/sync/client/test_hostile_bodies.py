"""Bodies built to exhaust memory or disk are stopped early: a line of hundreds of MB, a compressed bomb.

The bodies are generated lazily and count what was read of them, so each test proves the
client stopped soon after its bound instead of reading (or decompressing) everything.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from sharesync.sync.core.errors import DownloadError, ProtocolViolation
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.download import Downloader, DownloadOptions
from sharesync.sync.protocol.ndjson import MAX_LINE_BYTES
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.wire import File

from .conftest import ECHO, metadata, protocol

MiB = 1024 * 1024


class EndlessLine(httpx.SyncByteStream):
    """The protocol and metaData lines, then one line of ``total`` bytes with no newline in it."""

    def __init__(self, total: int) -> None:
        self.total, self.sent = total, 0

    def __iter__(self) -> Iterator[bytes]:
        yield (json.dumps(protocol()) + "\n" + json.dumps(metadata()) + "\n").encode()
        while self.sent < self.total:
            self.sent += MiB
            yield b'{"file":{"url":"' if self.sent == MiB else b"x" * MiB


def test_an_ndjson_line_of_200_mb_is_refused_at_64_mib(make_client: Callable[..., SharingClient]) -> None:
    body = EndlessLine(200 * MiB)
    headers = {"Content-Type": "application/x-ndjson", "Delta-Table-Version": "1", "delta-sharing-capabilities": ECHO}
    client = make_client(lambda request: httpx.Response(200, headers=headers, stream=body))
    with pytest.raises(ProtocolViolation, match=f"a response line is longer than {MAX_LINE_BYTES} bytes"):
        client.query("share.schema.t")
    assert body.sent <= MAX_LINE_BYTES + 2 * MiB, f"read {body.sent // MiB} MiB of a 200 MiB line"


class GzipBomb(httpx.AsyncByteStream):
    """``gzip`` of 64 MiB of zeros (about 64 kB), sent in 4 kB pieces."""

    def __init__(self) -> None:
        self.data = gzip.compress(b"\0" * (64 * MiB), compresslevel=9)
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while self.sent < len(self.data):
            piece = self.data[self.sent : self.sent + 4096]
            self.sent += len(piece)
            yield piece


def test_a_compressed_bomb_is_stopped_at_the_declared_size(tmp_path: Path) -> None:
    bomb = GzipBomb()
    asked: list[str | None] = []

    def storage(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("Accept-Encoding"))
        return httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=bomb)  # compressed anyway

    declared = 100_000
    downloader = Downloader(tmp_path, policy=FileUrlPolicy("https://sharing.example/ds"), options=DownloadOptions(chunk_size=64 * 1024, transport=httpx.MockTransport(storage), retry=RetryPolicy(max_attempts=1)))  # fmt: skip
    with pytest.raises(DownloadError, match="longer than the declared size; stopped"):
        downloader.download([File(url="https://bucket.example/bomb", id="bomb", size=declared)])
    assert asked == ["identity"]  # sharesync never asks for a compressed body
    assert bomb.sent < len(bomb.data) // 4, f"read {bomb.sent} of {len(bomb.data)} compressed bytes"
    assert list(tmp_path.iterdir()) == []
