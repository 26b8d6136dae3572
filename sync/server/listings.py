"""Paging of the list endpoints (shares, schemas, tables, all-tables).

Same contract as the reference ``SharedTableManager``: ``maxResults`` from 0 to 500 (default
500), an opaque ``nextPageToken`` bound to the listing it came from, and no token on the last
page (spec: "nextPageToken will not be returned in a response if there are no more results").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from sharesync.sync.server.problems import invalid
from sharesync.sync.server.signing import SignatureError, Signer

T = TypeVar("T")
LIST_TOKEN = "list"
_LIST_TOKEN_TTL_MS = 24 * 3600 * 1000


def parse_max_results(raw: str | None, cap: int) -> int:
    if raw is None:
        return cap
    try:
        value = int(raw)
    except ValueError:
        raise invalid("expected a number but the string didn't have the appropriate format") from None
    if not 0 <= value <= cap:
        raise invalid(f"Acceptable values of 'maxResults' are 0 to {cap}, inclusive. (Default: {cap})")
    return value


def page(
    items: Sequence[T], scope: str, max_results: int, page_token: str | None, signer: Signer, now_ms: int
) -> tuple[list[T], str | None]:
    """One page of ``items`` and the token of the next page (None on the last page)."""
    start = 0
    if page_token:
        try:
            payload = signer.decode_token(LIST_TOKEN, page_token, now_ms)
        except SignatureError:
            raise invalid("invalid 'nextPageToken'") from None
        if payload.get("s") != scope or int(payload.get("o", -1)) > len(items):
            raise invalid("invalid 'nextPageToken'")
        start = int(payload["o"])
    end = start + max_results
    token = None
    if end < len(items):
        token = signer.encode_token(LIST_TOKEN, {"s": scope, "o": end}, now_ms + _LIST_TOKEN_TTL_MS)
    return list(items[start:end]), token
