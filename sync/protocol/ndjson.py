"""Streamed NDJSON responses: lines → actions → pages → one stream of files.

Query, changes and metadata answer with one JSON action per line (Delta Sharing protocol, "API
Response Format in Parquet"). Nothing here holds a whole body: bytes are split into lines as they arrive,
each line is validated by :func:`sharesync.sync.protocol.wire.parse_action`, and a :class:`Page` enforces the
grammar — ``protocol`` and ``metaData`` first, then files, ``endStreamAction`` last. A
:class:`FileStream` follows ``nextPageToken`` from page to page (one loop does the I/O) and,
when a page breaks off (truncated, connection reset), asks for the same page again and skips
the files it already handed out, so a consumer sees each file once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

from sharesync.sync.core.errors import ProtocolViolation, SharesyncError, StreamError, TruncatedStream
from sharesync.sync.protocol.http_errors import translate_httpx_errors
from sharesync.sync.protocol.retry import RetryBudget
from sharesync.sync.protocol.transport import (
    CAPABILITIES_HEADER,
    SharingHttp,
    parse_capabilities,
    table_version_header,
)
from sharesync.sync.protocol.wire import (
    Action,
    AddFile,
    CdfFile,
    DataFile,
    EndStreamAction,
    File,
    Metadata,
    Protocol,
    RemoveFile,
    parse_action,
)

logger = logging.getLogger(__name__)

# One line holds one action; even a wide schema string is far below this.
MAX_LINE_BYTES = 64 * 1024 * 1024
# The reader protocol version this client implements (spec "Protocol": currently always 1).
READER_VERSION = 1

SNAPSHOT_FILES: tuple[type[DataFile], ...] = (File,)
CHANGE_FILES: tuple[type[DataFile], ...] = (AddFile, CdfFile, RemoveFile)
ANY_FILES: tuple[type[DataFile], ...] = (File, AddFile, CdfFile, RemoveFile)

_KIND = {Protocol: "protocol", Metadata: "metaData", File: "file", AddFile: "add", CdfFile: "cdf", RemoveFile: "remove"}


class PageCursor:
    """Pagination state machine: START → (token)* → DONE.

    Spec: "the nextPageToken field may be an empty string or missing when there are no
    additional results" — both end the listing. A token repeated verbatim would loop forever,
    so it is a protocol violation.
    """

    def __init__(self, context: str) -> None:
        self.context = context
        self.token: str | None = None
        self.done = False
        self.pages = 0

    def advance(self, next_token: str | None) -> None:
        self.pages += 1
        if not next_token:
            self.done = True
        elif next_token == self.token:
            raise ProtocolViolation(f"{self.context}: the server returned the same nextPageToken twice")
        else:
            self.token = next_token


def split_lines(
    chunks: Iterable[bytes], *, context: str, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[bytes, bool]]:
    """``(line, terminated)`` pairs; ``terminated`` is False for a last line without ``\\n``."""
    buffer = bytearray()
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            buffer += chunk[start:end]
            yield bytes(buffer), True
            buffer.clear()
            start = end + 1
        buffer += chunk[start:]
        if len(buffer) > max_line_bytes:
            raise ProtocolViolation(f"{context}: a response line is longer than {max_line_bytes} bytes")
    if buffer:
        yield bytes(buffer), False


def parse_lines(chunks: Iterable[bytes], *, context: str) -> Iterator[Action]:
    """Actions from raw body chunks; an unparsable unterminated last line means the body was cut.

    A line holding only actions this client does not know is skipped (forward compatibility).
    """
    for raw, terminated in split_lines(chunks, context=context):
        line = raw.strip()
        if not line:
            continue
        try:
            action = parse_action(line)
        except ProtocolViolation as exc:
            if not terminated:
                raise TruncatedStream(f"{context}: the response stopped in the middle of a line") from None
            raise ProtocolViolation(f"{context}: {exc.message}") from None
        if action is None:
            unknown = ", ".join(repr(key) for key in json.loads(line))
            logger.debug("%s: skipped a line with an action this sharesync does not know (%s)", context, unknown)
            continue
        yield action


class Page:
    """One NDJSON response: header actions read at once, the rest streamed by :meth:`body`."""

    def __init__(
        self,
        actions: Iterator[Action],
        *,
        context: str,
        end_expected: bool,
        allowed: tuple[type[DataFile], ...],
    ) -> None:
        self._actions = actions
        self.context = context
        self.end_expected = end_expected
        self.allowed = allowed
        self.end: EndStreamAction | None = None
        self.protocol, self.metadata = self._read_header()

    def _read_header(self) -> tuple[Protocol, Metadata]:
        protocol: Protocol | None = None
        metadata: Metadata | None = None
        while protocol is None or metadata is None:
            action = next(self._actions, None)
            if action is None:
                raise TruncatedStream(f"{self.context}: the response ended before its protocol and metaData lines")
            if isinstance(action, Protocol) and protocol is None:
                protocol = action
            elif isinstance(action, Metadata) and metadata is None:
                metadata = action
            elif isinstance(action, EndStreamAction):
                self._check_end(action)
                raise ProtocolViolation(f"{self.context}: endStreamAction came before the protocol and metaData lines")
            else:
                raise ProtocolViolation(
                    f"{self.context}: expected protocol and metaData first, got {_KIND.get(type(action), 'another')} line"
                )
        if protocol.min_reader_version > READER_VERSION:
            raise ProtocolViolation(
                f"{self.context}: the table needs reader version {protocol.min_reader_version}; this sharesync reads "
                f"version {READER_VERSION}: upgrade sharesync"
            )
        return protocol, metadata

    def body(self) -> Iterator[DataFile | Metadata]:
        """Files (and, in change feeds, historical metaData) in server order; checks the ending."""
        for action in self._actions:
            if self.end is not None:
                raise ProtocolViolation(f"{self.context}: a line followed the endStreamAction")
            if isinstance(action, EndStreamAction):
                self._check_end(action)
                self.end = action
            elif isinstance(action, Metadata):
                yield action  # includeHistoricalMetadata / startingVersion: schema as of a version
            elif isinstance(action, self.allowed):
                yield action
            else:
                raise ProtocolViolation(
                    f"{self.context}: unexpected {_KIND.get(type(action), 'other')} line in this response"
                )
        # Capabilities header: a server that echoed includeendstreamaction=true promised an ending.
        if self.end is None and self.end_expected:
            raise TruncatedStream(f"{self.context}: the response ended without its endStreamAction (cut off)")

    def _check_end(self, end: EndStreamAction) -> None:
        # endStreamAction.errorMessage: "the client must fail the query when present".
        if end.error_message:
            raise StreamError(f"{self.context}: the server failed while streaming: {end.error_message}")


@dataclass(frozen=True)
class StreamCall:
    """How to ask for one page of a query/changes/metadata response."""

    method: str
    url: str
    context: str
    request: Callable[[str | None], tuple[dict[str, str | int] | None, dict[str, Any] | None]]
    allowed: tuple[type[DataFile], ...]


class _OpenPage:
    def __init__(self, stack: ExitStack, version: int, page: Page) -> None:
        self.stack, self.version, self.page = stack, version, page

    def close(self) -> None:
        self.stack.close()


def open_page(http: SharingHttp, call: StreamCall, token: str | None) -> _OpenPage:
    """One attempt at one page: send, check the headers, read the protocol/metaData lines."""
    params, body = call.request(token)
    stack = ExitStack()
    try:
        response = stack.enter_context(
            http.open(call.method, call.url, params=params, body=body, context=call.context, capabilities=True)
        )
        capabilities = parse_capabilities(response.headers.get(CAPABILITIES_HEADER))
        # Spec: "requests parquet format and the response is in delta format, the client must throw".
        if capabilities.get("responseformat", "parquet") != "parquet":
            raise ProtocolViolation(
                f"{call.context}: asked for responseformat=parquet, got {capabilities['responseformat']!r}"
            )
        version = table_version_header(response.headers, call.context)

        def chunks() -> Iterator[bytes]:
            with translate_httpx_errors(call.context):
                yield from response.iter_bytes()

        page = Page(
            parse_lines(chunks(), context=call.context),
            context=call.context,
            end_expected=capabilities.get("includeendstreamaction") == "true",
            allowed=call.allowed,
        )
    except BaseException:
        stack.close()
        raise
    return _OpenPage(stack, version, page)


class FileStream:
    """The files of a query or change feed, page after page, as they stream in.

    The first page is opened on construction, so ``version``, ``protocol`` and ``metadata`` are
    known before the first file. After exhaustion, ``end_stream_action``, ``refresh_token`` and
    ``min_url_expiration_timestamp`` hold what the endStreamActions said. Close it (or use
    ``with``) when stopping early.
    """

    def __init__(self, http: SharingHttp, call: StreamCall) -> None:
        self._http = http
        self._call = call
        self.context = call.context
        self.pages = 0
        self.historical_metadata: list[Metadata] = []
        self.refresh_token: str | None = None
        self.min_url_expiration_timestamp: int | None = None
        self.end_stream_action: EndStreamAction | None = None
        self._last_page_ended = False
        self._emitted_any = False
        self._cursor = PageCursor(call.context)
        budget = http.retry.budget(call.context)
        first = self._open_with_retries(None, budget, first=True)
        self._current: _OpenPage | None = first
        self.version = first.version
        self.protocol = first.page.protocol
        self.metadata = first.page.metadata
        self._items = self._run(first, budget)

    def __repr__(self) -> str:
        return f"FileStream({self.context!r}, version={self.version}, pages={self.pages})"

    def __iter__(self) -> FileStream:
        return self

    def __next__(self) -> DataFile:
        return next(self._items)

    def close(self) -> None:
        self._items.close()
        if self._current is not None:
            self._current.close()
            self._current = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------ the one I/O loop

    def _run(self, first: _OpenPage, budget: RetryBudget) -> Generator[DataFile, None, None]:
        opened: _OpenPage | None = first
        while True:
            yield from self._drain(opened, budget)
            end = self.end_stream_action if self._last_page_ended else None
            # endStreamAction.nextPageToken drives query/changes pagination (maxFiles + pageToken).
            self._cursor.advance(end.next_page_token if end else None)
            if self._cursor.done:
                return
            budget = self._http.retry.budget(f"{self.context} (page {self.pages + 1})")
            opened = None

    def _drain(self, opened: _OpenPage | None, budget: RetryBudget) -> Iterator[DataFile]:
        """Stream one page; on a retryable break, fetch the same page again and skip what was sent."""
        emitted: list[str] = []
        while True:
            try:
                if opened is None:
                    opened = self._open_checked(self._cursor.token)
                self._current = opened
                index = 0
                for item in opened.page.body():
                    if isinstance(item, Metadata):
                        if item not in self.historical_metadata:
                            self.historical_metadata.append(item)
                        continue
                    if index < len(emitted):
                        if item.id != emitted[index]:
                            raise ProtocolViolation(
                                f"{self.context}: the page sent again after a failure lists different files; run again"
                            )
                        index += 1
                        continue
                    emitted.append(item.id)
                    index += 1
                    self._emitted_any = True
                    yield item
                self._finish_page(opened.page.end)
                return
            except SharesyncError as exc:
                if opened is not None:
                    opened.close()
                    opened = None
                budget.failed(exc)  # re-raises when not retryable or out of budget
            finally:
                if opened is not None:
                    opened.close()
                    opened = None
                self._current = None

    def _open_with_retries(self, token: str | None, budget: RetryBudget, *, first: bool = False) -> _OpenPage:
        while True:
            try:
                return open_page(self._http, self._call, token) if first else self._open_checked(token)
            except SharesyncError as exc:
                budget.failed(exc)

    def _open_checked(self, token: str | None) -> _OpenPage:
        """Open a page and check it belongs to the same table version as the first one."""
        opened = open_page(self._http, self._call, token)
        page = opened.page
        same = opened.version == self.version and page.protocol == self.protocol and page.metadata == self.metadata
        if not same:
            if not self._emitted_any:  # nothing handed out yet: the newer answer simply wins
                self.version, self.protocol, self.metadata = opened.version, page.protocol, page.metadata
                return opened
            opened.close()
            raise ProtocolViolation(
                f"{self.context}: the table changed between pages (version {self.version} → {opened.version}); run again"
            )
        return opened

    def _finish_page(self, end: EndStreamAction | None) -> None:
        self.pages += 1
        self._last_page_ended = end is not None
        if end is None:
            return
        self.end_stream_action = end
        if end.refresh_token and self.refresh_token is None:
            self.refresh_token = end.refresh_token
        expiry, current = end.min_url_expiration_timestamp, self.min_url_expiration_timestamp
        if expiry is not None:
            self.min_url_expiration_timestamp = expiry if current is None else min(current, expiry)
