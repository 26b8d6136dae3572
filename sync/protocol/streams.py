"""Pages of a query, change feed or metadata answer, strung together into one stream of files.

A :class:`FileStream` opens the first page at once (its ``protocol`` and ``metaData`` are known
before the first file), follows ``nextPageToken`` from page to page (one loop does the I/O) and,
when a page breaks off (truncated, connection reset), asks for the same page again and skips the
files it already handed out, so a consumer sees each file once. Each page is read in the format
the server chose (the request offers both, :data:`~sharesync.sync.protocol.transport.REQUEST_CAPABILITIES`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from types import TracebackType
from typing import Any, Self

from pydantic import ValidationError

from sharesync.sync.core.errors import ProtocolViolation, SharesyncError
from sharesync.sync.protocol.deltaformat import parse_delta_action
from sharesync.sync.protocol.http_errors import translate_httpx_errors
from sharesync.sync.protocol.ndjson import DELTA, PARQUET, LineParser, Page, PageCursor, parse_lines
from sharesync.sync.protocol.retry import RetryBudget
from sharesync.sync.protocol.transport import (
    CAPABILITIES_HEADER,
    FILE_ID_HASH_HEADER,
    MAX_JSON_BYTES,
    TABLE_VERSION_HEADER,
    FileIdScheme,
    SharingHttp,
    parse_capabilities,
    read_bounded,
    table_version_header,
)
from sharesync.sync.protocol.wire import (
    DataFile,
    EndStreamAction,
    Metadata,
    Protocol,
    QueryStatus,
    QueryStatusLine,
    parse_action,
)


@dataclass(frozen=True)
class StreamCall:
    """How to ask for one page of a query/changes/metadata response."""

    method: str
    url: str
    context: str
    request: Callable[[str | None], tuple[dict[str, str | int] | None, dict[str, Any] | None]]
    allowed: tuple[type[DataFile], ...]
    table: str = ""  # share.schema.table, for errors that name the table
    changes: bool = False  # a change feed: delta-format ``add`` lines are changes, not snapshot files
    file_id_hash: FileIdScheme | None = None  # the ``fileidhash`` scheme to ask for (None: not sent)
    offer_async: bool = False  # ask for ``asyncquery=true`` (a submission)
    may_pend: bool = False  # an answer without Delta-Table-Version is a ``queryStatus`` line


class _OpenPage:
    def __init__(self, stack: ExitStack, version: int, page: Page) -> None:
        self.stack, self.version, self.page = stack, version, page

    def close(self) -> None:
        self.stack.close()


def _line_parser(response_format: str, call: StreamCall) -> LineParser:
    """Spec "responseFormat": a server may answer in either format offered, one per response."""
    if response_format == PARQUET:
        return parse_action
    if response_format == DELTA:
        return partial(parse_delta_action, changes=call.changes)
    raise ProtocolViolation(
        f"{call.context}: the server answered in responseformat={response_format!r}; sharesync reads parquet and delta"
    )


def open_page(http: SharingHttp, call: StreamCall, token: str | None) -> _OpenPage | QueryStatus:
    """One attempt at one page: send, check the headers, read the protocol/metaData lines.

    A :class:`QueryStatus` instead when the call may pend and the answer carries no table
    version (spec "Get Query Info": the header is "only present once the query has succeeded").
    """
    params, body = call.request(token)
    stack = ExitStack()
    try:
        response = stack.enter_context(
            http.open(
                call.method,
                call.url,
                params=params,
                body=body,
                context=call.context,
                capabilities=True,
                asyncquery=call.offer_async,
                file_id_hash=call.file_id_hash,
            )
        )
        if call.may_pend and TABLE_VERSION_HEADER not in response.headers:
            with translate_httpx_errors(call.context):
                raw = read_bounded(response, MAX_JSON_BYTES, call.context)
            stack.close()
            return _query_status(raw, call.context)
        _check_file_id_echo(response.headers.get(FILE_ID_HASH_HEADER), call)
        capabilities = parse_capabilities(response.headers.get(CAPABILITIES_HEADER))
        # Spec: a server that does not know the header answers in parquet, and says nothing.
        response_format = capabilities.get("responseformat", PARQUET)
        parse = _line_parser(response_format, call)
        version = table_version_header(response.headers, call.context)

        def chunks() -> Iterator[bytes]:
            with translate_httpx_errors(call.context):
                yield from response.iter_bytes()

        page = Page(
            parse_lines(chunks(), context=call.context, parse=parse),
            context=call.context,
            end_expected=capabilities.get("includeendstreamaction") == "true",
            allowed=call.allowed,
            response_format=response_format,
            table=call.table,
        )
    except BaseException:
        stack.close()
        raise
    return _OpenPage(stack, version, page)


def _check_file_id_echo(echoed: str | None, call: StreamCall) -> None:
    """Spec "File ID Hash Header", client verification: a missing or different echo is an error
    (the ids may follow another scheme, and sharesync pairs DV changes and downloads by id)."""
    if call.file_id_hash is None or (echoed or "").strip().lower() == call.file_id_hash:
        return
    got = "did not echo the fileidhash header" if echoed is None else f"echoed fileidhash={echoed!r}"
    raise ProtocolViolation(
        f"{call.context}: sharesync asked for file ids of scheme fileidhash={call.file_id_hash}, but the server "
        f"{got}, so its file ids may follow another scheme; remove 'file_id_hash' from the config for this server"
    )


def _query_status(raw: bytes, context: str) -> QueryStatus:
    try:
        return QueryStatusLine.model_validate_json(raw.strip()).query_status
    except ValidationError:
        raise ProtocolViolation(
            f"{context}: the answer has neither a {TABLE_VERSION_HEADER} header nor a queryStatus line"
        ) from None


def open_first_page(http: SharingHttp, call: StreamCall) -> tuple[_OpenPage | QueryStatus, RetryBudget]:
    """The first page of ``call`` (or the status of a query still pending), retried on Retryable failures."""
    budget = http.retry.budget(call.context)
    while True:
        try:
            return open_page(http, call, None), budget
        except SharesyncError as exc:
            budget.failed(exc)


class FileStream:
    """The files of a query or change feed, page after page, as they stream in.

    The first page is opened on construction, so ``version``, ``protocol`` and ``metadata`` are
    known before the first file. After exhaustion, ``end_stream_action``, ``refresh_token`` and
    ``min_url_expiration_timestamp`` hold what the endStreamActions said. Close it (or use
    ``with``) when stopping early.
    """

    def __init__(
        self, http: SharingHttp, call: StreamCall, opened: tuple[_OpenPage, RetryBudget] | None = None
    ) -> None:
        self._http = http
        self._call = call
        self.context = call.context
        self.pages = 0
        self.historical_metadata: list[Metadata] = []
        self.historical_protocols: list[Protocol] = []
        self.refresh_token: str | None = None
        self.min_url_expiration_timestamp: int | None = None
        self.end_stream_action: EndStreamAction | None = None
        self._last_page_ended = False
        self._emitted_any = False
        self._cursor = PageCursor(call.context)
        if opened is None:
            answer, budget = open_first_page(http, call)
            if isinstance(answer, QueryStatus):
                raise ProtocolViolation(f"{call.context}: query {answer.query_id} is {answer.status}, not answered")
            opened = answer, budget
        first, budget = opened
        self._current: _OpenPage | None = first
        self.version = first.version
        self.protocol = first.page.protocol
        self.metadata = first.page.metadata
        self.response_format = first.page.response_format
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
                    if isinstance(item, Protocol):
                        if item not in self.historical_protocols:
                            self.historical_protocols.append(item)
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

    def _open_checked(self, token: str | None) -> _OpenPage:
        """Open a page and check it belongs to the same table version as the first one."""
        opened = open_page(self._http, self._call, token)
        if isinstance(opened, QueryStatus):
            raise ProtocolViolation(f"{self.context}: a later page of query {opened.query_id} is {opened.status}")
        page = opened.page
        first = (self.version, self.protocol, self.metadata, self.response_format)
        same = (opened.version, page.protocol, page.metadata, page.response_format) == first
        if not same:
            if not self._emitted_any:  # nothing handed out yet: the newer answer simply wins
                self.version, self.protocol, self.metadata = opened.version, page.protocol, page.metadata
                self.response_format = page.response_format
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
