"""Listing endpoints and their pagination state machine (spec notes on items / nextPageToken)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.client import SharingClient, TableRef
from sharesync.sync.protocol.ndjson import PageCursor

from .conftest import ENDPOINT

Make = Callable[..., SharingClient]


def pages(*bodies: dict[str, Any]) -> tuple[list[httpx.Request], Callable[[httpx.Request], httpx.Response]]:
    """Serve ``bodies`` in turn, keyed by the pageToken each request carries."""
    seen: list[httpx.Request] = []
    by_token = {None: bodies[0], **{f"t{i}": b for i, b in enumerate(bodies[1:], start=1)}}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=by_token[request.url.params.get("pageToken")])

    return seen, handler


@pytest.mark.parametrize(
    "last",
    [{"items": [{"name": "c"}]}, {"items": [{"name": "c"}], "nextPageToken": ""}, {"items": [{"name": "c"}], "nextPageToken": None}],
    ids=["token missing", "token empty", "token null"],
)
def test_missing_or_empty_next_page_token_ends_the_listing(make_client: Make, last: dict[str, Any]) -> None:
    seen, handler = pages({"items": [{"name": "a"}], "nextPageToken": "t1"},
                          {"items": [{"name": "b"}], "nextPageToken": "t2"}, last)
    assert [s.name for s in make_client(handler).list_shares(max_results=1)] == ["a", "b", "c"]
    assert [r.url.params.get("pageToken") for r in seen] == [None, "t1", "t2"]
    assert all(r.url.params["maxResults"] == "1" for r in seen)


def test_missing_or_empty_items_are_empty_pages(make_client: Make) -> None:
    seen, handler = pages({"nextPageToken": "t1"}, {"items": [], "nextPageToken": "t2"}, {"items": [{"name": "z"}]})
    assert [s.name for s in make_client(handler).list_shares()] == ["z"]
    assert len(seen) == 3


def test_an_empty_listing(make_client: Make) -> None:
    seen, handler = pages({})
    assert make_client(handler).list_shares() == []
    assert "maxResults" not in seen[0].url.params  # the server's default page size


@pytest.mark.parametrize("cycle", [["same"], ["a", "b"]], ids=["repeated", "cycling"])
def test_a_page_token_seen_before_is_a_protocol_violation(make_client: Make, cycle: list[str]) -> None:
    """A server that hands out a token again (at once, or A→B→A…) would be paged forever."""
    served: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        served.append(cycle[len(served) % len(cycle)])
        assert len(served) <= 10, "still paging"
        return httpx.Response(200, json={"items": [{"name": "a"}], "nextPageToken": served[-1]})

    with pytest.raises(ProtocolViolation, match="nextPageToken it had returned before"):
        make_client(handler).list_shares()
    assert len(served) == len(cycle) + 1


def test_client_page_size_is_the_default(make_client: Make) -> None:
    seen, handler = pages({})
    make_client(handler, page_size=25).list_shares()
    assert seen[0].url.params["maxResults"] == "25"


def test_every_listing_endpoint(make_client: Make) -> None:
    table = {"name": "t", "schema": "sc", "share": "s", "shareId": "sid", "id": "tid"}
    routes = {
        "/delta-sharing/shares/s": {"share": {"name": "s", "id": "sid"}},
        "/delta-sharing/shares/s/schemas": {"items": [{"name": "sc", "share": "s"}]},
        "/delta-sharing/shares/s/schemas/sc/tables": {"items": [table]},
        "/delta-sharing/shares/s/all-tables": {"items": [table, {**table, "schema": "other"}]},
    }
    client = make_client(lambda r: httpx.Response(200, json=routes[r.url.path]))
    assert client.get_share("s").id == "sid"
    assert [s.name for s in client.list_schemas("s")] == ["sc"]
    tables = client.list_tables("s", "sc")
    assert tables[0].full_name == "s.sc.t" and tables[0].share_id == "sid"
    assert [TableRef.of(t) for t in client.list_all_tables("s")] == [TableRef("s", "sc", "t"), TableRef("s", "other", "t")]


def test_names_are_url_encoded(make_client: Make) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(200, json={})

    make_client(handler).list_tables("my share", "a/b")
    assert seen == ["/delta-sharing/shares/my%20share/schemas/a%2Fb/tables"]
    assert ENDPOINT.endswith("/delta-sharing")


def test_a_malformed_listing_is_a_protocol_violation(make_client: Make) -> None:
    client = make_client(lambda r: httpx.Response(200, json={"items": [{"id": "no name"}]}))
    with pytest.raises(ProtocolViolation, match=r"list shares: unexpected response \(items.0.name: Field required\)"):
        client.list_shares()
    client = make_client(lambda r: httpx.Response(200, text="<html>"))
    with pytest.raises(ProtocolViolation, match="list shares: unexpected response"):
        client.list_shares()


def test_page_cursor_states() -> None:
    cursor = PageCursor("ctx")
    assert cursor.token is None and not cursor.done
    cursor.advance("a")
    assert cursor.token == "a" and not cursor.done
    cursor.advance("")
    assert cursor.done and cursor.pages == 2


def test_table_ref() -> None:
    assert TableRef.of("s.sc.t") == TableRef("s", "sc", "t") and str(TableRef("s", "sc", "t")) == "s.sc.t"
    with pytest.raises(ValueError, match="is not 'share.schema.table'"):
        TableRef.of("s.t")
