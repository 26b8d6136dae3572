"""Presigned file URLs: signature and expiry are checked for real; HEAD and Range work."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from support.faults import SharingServer

from sharesync.sync.protocol.wire import File

from .support import ORDERS, actions, error


def _a_file(api: httpx.Client) -> File:
    files = [a for a in actions(api.post(f"{ORDERS}/query", json={})) if isinstance(a, File)]
    return max(files, key=lambda f: f.size)


def _on_disk(server: SharingServer, file: File) -> bytes:
    relative = urlsplit(file.url).path.split("/files/demo/sales/orders/", 1)[1]
    return (server.root / "demo" / "sales" / "orders" / Path(httpx.URL(relative).path)).read_bytes()


def test_download_head_and_range(api: httpx.Client, sharing_server: SharingServer) -> None:
    file = _a_file(api)
    content = httpx.get(file.url)
    assert content.status_code == 200 and len(content.content) == file.size
    assert content.content == _on_disk(sharing_server, file) and content.content[:4] == b"PAR1"
    head = httpx.head(file.url)
    assert head.status_code == 200 and int(head.headers["content-length"]) == file.size and not head.content
    assert head.headers["accept-ranges"] == "bytes"
    tail = httpx.get(file.url, headers={"Range": "bytes=-8"})
    assert tail.status_code == 206 and tail.content == content.content[-8:]
    assert tail.headers["content-range"] == f"bytes {file.size - 8}-{file.size - 1}/{file.size}"
    middle = httpx.get(file.url, headers={"Range": "bytes=4-11"})
    assert middle.status_code == 206 and middle.content == content.content[4:12]
    assert httpx.get(file.url, headers={"Range": f"bytes={file.size}-"}).status_code == 416


def test_urls_need_no_bearer_token_but_expire(api: httpx.Client, sharing_server: SharingServer) -> None:
    sharing_server.faults.url_ttl_seconds = 30
    file = _a_file(api)
    assert file.expiration_timestamp is not None
    assert int(parse_qs(urlsplit(file.url).query)["exp"][0]) == file.expiration_timestamp
    assert httpx.get(file.url).status_code == 200
    sharing_server.clock.advance(31)
    body = error(httpx.get(file.url), 403)
    assert body["errorCode"] == "PERMISSION_DENIED" and body["message"].startswith("Request has expired")
    assert httpx.head(file.url).status_code == 403


@pytest.mark.parametrize("change", ["sig", "exp", "path", "drop"])
def test_tampered_urls_are_refused(api: httpx.Client, change: str) -> None:
    file = _a_file(api)
    parts = urlsplit(file.url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    path = parts.path
    if change == "sig":
        query["sig"] = "0" * 64
    elif change == "exp":
        query["exp"] = str(int(query["exp"]) + 1000)
    elif change == "path":
        path = path.replace("part-", "part-x")
    else:
        query = {}
    response = httpx.get(urlunsplit(parts._replace(path=path, query=urlencode(query))))
    assert error(response, 403)["errorCode"] == "PERMISSION_DENIED"
