"""Keeping presigned URLs fresh: whom to ask for new ones, and when.

A query answers with short-lived presigned URLs. A :class:`UrlRefresher` gets new URLs for the
same files: with the refreshToken for latest-snapshot queries, by re-issuing the same request for
versioned queries and change feeds (file ids are stable across requests, Delta Sharing protocol,
"File": "The same file is guaranteed to have the same id across multiple requests"). The
:class:`UrlBook` holds each file's current URL and when it expires: the earlier of the file's own
``expirationTimestamp`` and the answer's ``endStreamAction.minUrlExpirationTimestamp``. The
downloader renews a URL about to expire before using it, and one the storage refused after.
Deletion-vector files are renewed the same way, matched by their DV file key
(:mod:`sharesync.sync.protocol.dvfiles`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.dvfiles import Downloadable, downloadables
from sharesync.sync.protocol.responses import ChangesResult, FilesResult, QueryResult

if TYPE_CHECKING:
    from sharesync.sync.protocol.client import SharingClient

logger = logging.getLogger(__name__)


class UrlRefresher(Protocol):
    """New URLs for the files of one answer, keyed by file id (and their DV files, by DV file key)."""

    @property
    def min_url_expiration_ms(self) -> int | None:
        """The ``minUrlExpirationTimestamp`` of the answer whose URLs are in use (None: not sent)."""
        ...

    def refresh(self) -> Mapping[str, Downloadable]:
        """Ask again; ``min_url_expiration_ms`` then belongs to the new answer."""
        ...


class RefreshTokenRefresher:
    """Latest snapshot: query again with the refreshToken → the same file ids with new URLs."""

    def __init__(self, client: SharingClient, result: QueryResult) -> None:
        if not result.refresh_token:
            raise ValueError("the query result holds no refreshToken; use RequeryRefresher")
        self._client = client
        self._result = result
        self._token = result.refresh_token
        self.min_url_expiration_ms = result.min_url_expiration_timestamp

    def __repr__(self) -> str:
        return f"RefreshTokenRefresher({self._result.table})"

    def refresh(self) -> Mapping[str, Downloadable]:
        request = self._result.request.model_copy(
            update={"refresh_token": self._token, "include_refresh_token": True, "page_token": None}
        )
        fresh = self._client.query_request(self._result.table, request)
        if fresh.refresh_token:
            self._token = fresh.refresh_token
        self.min_url_expiration_ms = fresh.min_url_expiration_timestamp
        return downloadables(fresh.files)


class RequeryRefresher:
    """Versioned queries and change feeds: re-issue the same request and match files by id."""

    def __init__(self, fetch: Callable[[], FilesResult], description: str, min_url_expiration_ms: int | None) -> None:
        self._fetch = fetch
        self._description = description
        self.min_url_expiration_ms = min_url_expiration_ms

    def __repr__(self) -> str:
        return f"RequeryRefresher({self._description})"

    @classmethod
    def for_result(cls, client: SharingClient, result: QueryResult | ChangesResult) -> RequeryRefresher:
        expiry = result.min_url_expiration_timestamp
        if isinstance(result, QueryResult):
            request = result.request.model_copy(update={"page_token": None})
            return cls(lambda: client.query_request(result.table, request), f"query {result.table}", expiry)
        changes = result.request.model_copy(update={"page_token": None})
        return cls(lambda: client.changes_request(result.table, changes), f"changes {result.table}", expiry)

    def refresh(self) -> Mapping[str, Downloadable]:
        fresh = self._fetch()
        self.min_url_expiration_ms = fresh.min_url_expiration_timestamp
        return downloadables(fresh.files)


def refresher_for(client: SharingClient, result: QueryResult | ChangesResult) -> UrlRefresher:
    """The cheapest way to renew the URLs of ``result``."""
    if isinstance(result, QueryResult) and result.refresh_token:
        return RefreshTokenRefresher(client, result)
    return RequeryRefresher.for_result(client, result)


@dataclass
class Url:
    url: str = field(repr=False)  # presigned: its signature never goes into a repr
    expires_at: float | None  # epoch seconds
    received_at: float


class UrlBook:
    """The current URL of every file; refreshes are single-flight (one request renews all)."""

    def __init__(
        self, files: Iterable[Downloadable], refresher: UrlRefresher | None, clock: Callable[[], float]
    ) -> None:
        now = clock()
        bound = refresher.min_url_expiration_ms if refresher is not None else None
        self._urls = {f.id: Url(f.url, _expires_at(f, bound), now) for f in files}
        self._refresher = refresher
        self._clock = clock
        self._lock = asyncio.Lock()
        self.refreshes = 0

    @property
    def can_refresh(self) -> bool:
        return self._refresher is not None

    def current(self, file_id: str) -> Url:
        return self._urls[file_id]

    def expiring(self, entry: Url, margin: float, fraction: float) -> bool:
        """Whether less than ``min(margin, fraction of its lifetime)`` is left (only when it can be renewed)."""
        if entry.expires_at is None or self._refresher is None:
            return False
        lifetime = max(0.0, entry.expires_at - entry.received_at)
        return self._clock() + min(margin, lifetime * fraction) >= entry.expires_at

    async def refresh(self, file_id: str, stale: Url) -> Url:
        async with self._lock:
            current = self._urls[file_id]
            if current is not stale:  # another download already renewed it
                return current
            assert self._refresher is not None
            fresh = await asyncio.to_thread(self._refresher.refresh)
            self.refreshes += 1
            now, bound = self._clock(), self._refresher.min_url_expiration_ms
            for fid, f in fresh.items():
                if fid in self._urls:
                    self._urls[fid] = Url(f.url, _expires_at(f, bound), now)
            if file_id not in fresh:
                raise ProtocolViolation(f"refreshing URLs: file {file_id} is no longer in the server's answer")
            logger.info("renewed presigned URLs (%d files)", len(fresh))
            return self._urls[file_id]


def _expires_at(file: Downloadable, bound_ms: int | None) -> float | None:
    """Epoch seconds: the earlier of the file's own expiry and the answer's bound, whichever are known."""
    known = [ms for ms in (file.expiration_timestamp, bound_ms) if ms is not None]
    return min(known) / 1000 if known else None
