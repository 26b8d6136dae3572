"""The ASGI middleware that applies :class:`~support.faults.knobs.Faults` to a running sharing server.

It wraps the routes, which know nothing of faults: it answers errors before a route runs (an
outage, or a reference server's history error on ``/changes``), and rewrites response bodies
line by line (NDJSON routes send one line per body message) or byte by byte (file downloads).
Lying answers are :mod:`support.faults.hostile`'s.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import TYPE_CHECKING, Literal
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sharesync.sync.server.catalog import Catalog, SharedTable
from sharesync.sync.server.deltalog import DeltaLog
from sharesync.sync.server.problems import (
    INVALID_PARAMETER_VALUE,
    MALFORMED_REQUEST,
    PERMISSION_DENIED,
    RESOURCE_DOES_NOT_EXIST,
    RESOURCE_EXHAUSTED,
    TEMPORARILY_UNAVAILABLE,
    UNAUTHENTICATED,
    ApiError,
)
from sharesync.sync.server.settings import ServerSettings
from support.faults.hostile import Drip, FeedRewriter, alters_feed, ignore_asked

if TYPE_CHECKING:
    from support.faults.knobs import Faults

log = logging.getLogger(__name__)

NDJSON = b"application/x-ndjson"


HistoryError = Literal["table_files_missing", "log_truncated", "version_not_found", "change_data_file_not_found"]

# The history errors of the reference servers: (status, errorCode, message template).
HISTORY_ERRORS: dict[str, tuple[int, str, str]] = {
    # delta-io/delta-sharing server, DeltaSharingService: any FileNotFoundException (vacuumed files).
    "table_files_missing": (400, RESOURCE_DOES_NOT_EXIST, "table files missing"),
    # the same server on Delta Kernel: KernelException (as MALFORMED_REQUEST) for a cleaned-up log.
    "log_truncated": (
        400,
        MALFORMED_REQUEST,
        "{path}: Cannot load table version {start} as the transaction log has been truncated due to manual "
        "deletion or the log/checkpoint retention policy. The earliest available version is {earliest}.",
    ),
    # the same server on Delta Standalone: VersionNotFoundException (as INVALID_PARAMETER_VALUE).
    "version_not_found": (
        400,
        INVALID_PARAMETER_VALUE,
        "Cannot time travel Delta table to version {start}. Available versions: [{earliest}, {latest}].",
    ),
    # Delta's error condition for a change-data file removed by VACUUM (Databricks providers).
    "change_data_file_not_found": (
        400,
        INVALID_PARAMETER_VALUE,
        "[DELTA_CHANGE_DATA_FILE_NOT_FOUND] File {path}/_change_data/cdc-00000-{start}.c000.snappy.parquet "
        "referenced in the transaction log cannot be found. This can occur when the change data file is out "
        "of the retention period and has been deleted by the `VACUUM` statement.",
    ),
}


class InjectedDisconnect(Exception):
    """Raised inside the ASGI app to make the server drop the connection mid-body."""


# What a provider says with each status (the reference server's codes); others read as an outage.
_INJECTED: dict[int, tuple[str, str]] = {
    401: (UNAUTHENTICATED, "injected fault: the credential was revoked"),
    403: (PERMISSION_DENIED, "injected fault: the recipient has no access to this share (access was revoked)"),
    404: (RESOURCE_DOES_NOT_EXIST, "injected fault: the table is no longer shared"),
    429: (RESOURCE_EXHAUSTED, "injected fault: too many requests, retry later"),
}


def injected_error(faults: Faults) -> ApiError:
    headers = {"Retry-After": f"{faults.retry_after:g}"} if faults.retry_after is not None else {}
    code, message = _INJECTED.get(
        faults.error_status, (TEMPORARILY_UNAVAILABLE, "injected fault: the server is unavailable, retry later")
    )
    return ApiError(faults.error_status, code, message, headers)


def injected_history_error(faults: Faults, log: DeltaLog, table: SharedTable, query: bytes) -> ApiError | None:
    """The ``history_error`` answer for a ``/changes`` request (None once the budget is spent).

    The versions named are made up but consistent: the range asked for starts before the
    earliest version said to be available.
    """
    if faults.history_error is None or not faults.take():
        return None
    status, code, template = HISTORY_ERRORS[faults.history_error]
    latest = log.latest_version()
    start_text = dict(parse_qsl(query.decode("latin-1"))).get("startingVersion", "0")
    start = int(start_text) if start_text.isdigit() else 0
    path = f"file:/{table.share}/{table.schema}/{table.name}"
    message = template.format(path=path, start=start, earliest=min(start + 1, latest), latest=latest)
    return ApiError(status, code, message)


_GONE_BODY = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'


async def _send_error(send: Send, error: ApiError) -> None:
    """The JSON error answer the server's own exception handler would send."""
    body = json.dumps(error.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _end_stream_with_error(line: bytes, message: str) -> bytes:
    action = json.loads(line)
    action["endStreamAction"]["errorMessage"] = message
    return json.dumps(action, separators=(",", ":")).encode() + b"\n"


def fault_layers(app: ASGIApp, faults: Faults, catalog: Catalog, settings: ServerSettings) -> ASGIApp:
    """``app`` with the faults applied, an injected disconnect ending it quietly (the outermost layer)."""
    return _SwallowInjectedDisconnect(FaultMiddleware(app, faults, catalog, settings))


class _SwallowInjectedDisconnect:
    """An injected disconnect ends the app quietly, so the server closes the socket."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except InjectedDisconnect:
            log.info("injected disconnect on %s", scope.get("path"))


class FaultMiddleware:
    """Applies :class:`Faults` to API calls (under the prefix) and file downloads (under the files prefix)."""

    def __init__(self, app: ASGIApp, faults: Faults, catalog: Catalog, settings: ServerSettings) -> None:
        self.app, self.faults, self.catalog = app, faults, catalog
        self.prefix, self.files_prefix = settings.prefix, settings.files_prefix
        self._changes = re.compile(
            re.escape(settings.prefix) + r"/shares/([^/]+)/schemas/([^/]+)/tables/([^/]+)/changes"
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith(self.files_prefix):
            await self._file(scope, receive, send)
        elif path.startswith(self.prefix):
            await self._api(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _api(self, scope: Scope, receive: Receive, send: Send) -> None:
        faults = self.faults
        if faults.roll_error():
            await _send_error(send, injected_error(faults))
            return
        if faults.history_error is not None and (error := await self._history_error(scope)) is not None:
            await _send_error(send, error)
            return
        scope = {**scope, "query_string": ignore_asked(scope["path"], scope.get("query_string", b""), faults)}
        if faults.drip_seconds > 0:
            send = Drip(faults, send)
        if alters_feed(faults):
            send = FeedRewriter(faults, send, self.files_prefix)
        if not faults.alters_streams:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _StreamRewriter(faults, send))

    async def _history_error(self, scope: Scope) -> ApiError | None:
        """``/changes`` of a table this server shares with URLs answered with the history error."""
        match = self._changes.fullmatch(scope["path"])
        if match is None:
            return None
        try:
            table = self.catalog.table(*match.groups())
        except ApiError:
            return None  # the route answers the table's absence
        if "url" not in (table.access_modes or ("url",)):
            return None  # nor a dir-only table's refusal
        query: bytes = scope.get("query_string", b"")
        log = self.catalog.log(table)
        return await run_in_threadpool(injected_history_error, self.faults, log, table, query)

    async def _file(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Counted from the request's arrival until just before its last bytes go out (not after:
        # by then the client may have its next request in), so the count never exceeds the client's.
        faults, counted = self.faults, True
        faults.files_in_flight += 1
        faults.peak_files_in_flight = max(faults.peak_files_in_flight, faults.files_in_flight)

        async def send_counted(message: Message) -> None:
            nonlocal counted
            last = message["type"] == "http.response.body" and not message.get("more_body", False)
            if last and counted:
                counted = False
                faults.files_in_flight -= 1
            await send(message)

        try:
            await self._serve_file(scope, receive, send_counted)
        finally:
            if counted:
                faults.files_in_flight -= 1

    async def _serve_file(self, scope: Scope, receive: Receive, send: Send) -> None:
        faults = self.faults
        if faults.drip_seconds > 0:
            send = Drip(faults, send)
        if faults.download_delay_seconds > 0:
            await asyncio.sleep(faults.download_delay_seconds)
        if faults.gone_files and faults.gone(scope["path"]):
            await self._gone(send, head=scope["method"] == "HEAD")
            return
        if not faults.alters_files:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _FileRewriter(faults, send, head=scope["method"] == "HEAD"))

    async def _gone(self, send: Send, *, head: bool) -> None:
        """What object storage answers for a deleted object (S3's words; 410 as some CDNs say it)."""
        status = self.faults.gone_status
        code, message = ("NoSuchKey", "The specified key does not exist.") if status == 404 else ("Gone", "Gone")
        body = _GONE_BODY.format(code=code, message=message).encode()
        headers = [(b"content-type", b"application/xml"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if head else body})


class _StreamRewriter:
    """Holds back one NDJSON line so the last line can be dropped, cut or given an errorMessage."""

    def __init__(self, faults: Faults, send: Send) -> None:
        self.faults, self.send = faults, send
        self.active = False
        self.held: bytes | None = None
        self.sent_lines = 0

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers", [])).get(b"content-type", b"")
            self.active = message["status"] == 200 and content_type.startswith(NDJSON) and self.faults.take()
            await self.send(message)
            return
        if not self.active or message["type"] != "http.response.body":
            await self.send(message)
            return
        if message.get("body"):
            if self.held is not None:
                await self._emit(self.held)
            self.held = message["body"]
        if not message.get("more_body", False):
            await self._finish()

    async def _emit(self, line: bytes) -> None:
        if self.faults.drop_connection and self.sent_lines >= 1:
            raise InjectedDisconnect("injected fault: connection dropped mid-stream")
        await self.send({"type": "http.response.body", "body": line, "more_body": True})
        self.sent_lines += 1

    async def _finish(self) -> None:
        last, faults = self.held, self.faults
        if last is not None:
            if last.startswith(b'{"endStreamAction"'):
                if faults.drop_end_stream_action:
                    last = None
                elif faults.end_stream_error:
                    last = _end_stream_with_error(last, faults.end_stream_error)
            if last is not None and faults.truncate_stream:
                last = last[: max(1, len(last) // 2)]
            if last is not None:
                await self._emit(last)
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


class _FileRewriter:
    """Serves a whole file (200) with a length other than the declared ``size``, or drops it half way.

    Content-Length always matches what is sent, so the client sees a well-formed response
    whose body is wrong, exactly what a size check must catch. Range answers (206) are left
    alone: a lying range would only confuse readers, not test them.
    """

    def __init__(self, faults: Faults, send: Send, *, head: bool) -> None:
        self.faults, self.send, self.head = faults, send, head
        self.active = False
        self.remaining = 0
        self.sent = 0
        self.declared = 0

    async def __call__(self, message: Message) -> None:
        faults = self.faults
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers", []))
            self.active = message["status"] == 200 and faults.take()
            if self.active:
                self.declared = int(headers.get(b"content-length", b"0"))
                self.remaining = max(0, self.declared + faults.file_size_delta)
                if faults.file_size_delta:
                    headers[b"content-length"] = str(self.remaining).encode()
                message = {**message, "headers": list(headers.items())}
            await self.send(message)
            return
        if not self.active or self.head or message["type"] != "http.response.body":
            await self.send(message)
            return
        body: bytes = message.get("body", b"")
        more = message.get("more_body", False)
        if faults.drop_file_connection and self.sent + len(body) > self.declared // 2:
            cut = max(0, self.declared // 2 - self.sent)
            await self.send({"type": "http.response.body", "body": body[:cut], "more_body": True})
            raise InjectedDisconnect("injected fault: connection dropped mid-download")
        chunk = body[: self.remaining]
        self.remaining -= len(chunk)
        self.sent += len(chunk)
        if not more and self.remaining > 0:  # longer than declared: pad with zero bytes
            chunk += b"\0" * self.remaining
            self.remaining = 0
        await self.send({"type": "http.response.body", "body": chunk, "more_body": more})
