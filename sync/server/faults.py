"""Fault knobs and the ASGI middleware that applies them, so clients can be tested against a bad day.

Real providers expire URLs, rate-limit, fail with 5xx, cut streams and serve files that do
not match their declared size; sharesync must survive all of it. The knobs live in one
:class:`Faults` object that tests change at runtime on a running server (plain attribute
assignment, validated) and ``sharesync serve`` sets from flags. The middleware wraps the
routes, which know nothing of faults: it answers errors before a route runs, and rewrites
response bodies line by line (NDJSON routes send one line per body message) or byte by byte
(file downloads). Randomness comes from a seeded RNG, so a seed replays the same faults.

Knobs, by what they imitate:

* outages: ``error_rate`` / ``error_status`` / ``retry_after`` (429, 5xx, revoked access);
* broken streams: ``truncate_stream``, ``drop_connection``, ``drop_end_stream_action``,
  ``end_stream_error`` (a failure after the 200; real ones, such as a file gone while the
  answer streams, produce the same ``errorMessage`` without any knob);
* broken downloads: ``url_ttl_seconds`` (expiry), ``file_size_delta``, ``drop_file_connection``,
  ``download_delay_seconds``;
* vacuumed history, as a real provider shows it:
  ``unchecked_presign`` presigns without checking that files still exist, as the reference
  server does, so time travel and change queries hand out URLs of vacuumed files, which the
  file endpoint answers with 404; ``gone_files`` makes chosen files answer ``gone_status``
  (404 or 410, with a storage-style XML body) although they exist, e.g. ``("_change_data/",)``
  for every change-data file; ``history_error`` answers ``/changes`` with one of the reference
  servers' history errors (:data:`HISTORY_ERRORS`).

``budget`` caps how many responses any knob may fault (then the server behaves again). A
provider that lies rather than fails (repeated or missing file actions, file URLs aimed
elsewhere, a drip of bytes) has its knobs here too; :mod:`sharesync.sync.server.hostile` applies them.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.deltalog import DeltaLog
from sharesync.sync.server.hostile import Drip, FeedRewriter, alters_feed, ignore_asked
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


class Faults(BaseModel):
    """What goes wrong, and how often. Every field can be changed while the server runs."""

    model_config = ConfigDict(validate_assignment=True)

    url_ttl_seconds: float = Field(default=3600.0, gt=0, description="lifetime of presigned file URLs")
    error_rate: float = Field(default=0.0, ge=0, le=1, description="share of API calls answered with error_status")
    error_status: int = Field(default=503, ge=400, le=599, description="status of injected errors (429, 500, 503, …)")
    retry_after: float | None = Field(default=None, ge=0, description="Retry-After seconds sent with injected errors")
    drop_end_stream_action: bool = Field(default=False, description="omit the endStreamAction line")
    truncate_stream: bool = Field(default=False, description="end NDJSON bodies in the middle of their last line")
    drop_connection: bool = Field(default=False, description="abort NDJSON responses after their first line")
    end_stream_error: str | None = Field(default=None, description="errorMessage put into endStreamAction")
    download_delay_seconds: float = Field(default=0.0, ge=0, description="pause before each file download")
    file_size_delta: int = Field(default=0, description="serve files this many bytes longer (>0) or shorter (<0)")
    drop_file_connection: bool = Field(default=False, description="abort file downloads half way")
    unchecked_presign: bool = Field(default=False, description="presign files without checking they exist")
    gone_files: tuple[str, ...] = Field(default=(), description="file paths containing one of these answer gone_status")
    gone_status: Literal[404, 410] = Field(default=404, description="status of gone_files downloads")
    history_error: HistoryError | None = Field(default=None, description="answer /changes with this history error")
    repeat_file_action: bool = Field(default=False, description="send each answer's first file action twice")
    reverse_file_actions: bool = Field(default=False, description="send file actions in reverse order")
    omit_version: int | None = Field(default=None, description="leave out every file action of this version")
    file_url_origin: str | None = Field(default=None, description="presign file URLs at this origin instead")
    label_version: int | None = Field(default=None, ge=0, description="label every answer with this version")
    ignore_ending_version: bool = Field(default=False, description="answer /changes up to the latest version")
    ignore_metadata_version: bool = Field(default=False, description="answer /metadata of the latest version")
    drip_seconds: float = Field(default=0.0, ge=0, description="send every body one byte per this many seconds")
    omit_configuration: bool = Field(default=False, description="leave metaData.configuration out (optional)")
    budget: int | None = Field(
        default=None, ge=0, description="how many more responses may be faulted (None: no limit)"
    )
    seed: int = Field(default=0, description="seed of the RNG behind error_rate")

    _rng: random.Random = PrivateAttr(default_factory=lambda: random.Random(0))
    faulted: int = Field(default=0, description="responses faulted so far (read it in tests)")
    files_in_flight: int = Field(default=0, description="file downloads being served now (read it in tests)")
    peak_files_in_flight: int = Field(default=0, description="the most file downloads served at once")

    def model_post_init(self, context: Any) -> None:
        self._rng = random.Random(self.seed)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name == "seed":
            self._rng = random.Random(value)

    def reset(self) -> None:
        """Back to a well-behaved server (keeps the URL lifetime)."""
        ttl = self.url_ttl_seconds
        for name, info in type(self).model_fields.items():
            setattr(self, name, info.default)
        self.url_ttl_seconds = ttl

    def take(self) -> bool:
        """Spend one unit of budget; False when the budget is used up."""
        if self.budget is not None:
            if self.budget <= 0:
                return False
            self.budget -= 1
        self.faulted += 1
        return True

    def roll_error(self) -> bool:
        return self.error_rate > 0 and self._rng.random() < self.error_rate and self.take()

    @property
    def alters_streams(self) -> bool:
        return (
            self.drop_end_stream_action or self.truncate_stream or self.drop_connection or bool(self.end_stream_error)
        )

    @property
    def alters_files(self) -> bool:
        return self.file_size_delta != 0 or self.drop_file_connection

    def gone(self, path: str) -> bool:
        return any(fragment in path for fragment in self.gone_files) and self.take()


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


def injected_history_error(
    faults: Faults, log: DeltaLog, table: SharedTable, query: Mapping[str, str]
) -> ApiError | None:
    """The ``history_error`` answer for a ``/changes`` request (None once the budget is spent).

    The versions named are made up but consistent: the range asked for starts before the
    earliest version said to be available.
    """
    if faults.history_error is None or not faults.take():
        return None
    status, code, template = HISTORY_ERRORS[faults.history_error]
    latest = log.latest_version()
    start_text = query.get("startingVersion", "0")
    start = int(start_text) if start_text.isdigit() else 0
    earliest = min(start + 1, latest)
    message = template.format(path=f"file:/{table.share}/{table.schema}/{table.name}", start=start,
                              earliest=earliest, latest=latest)  # fmt: skip
    return ApiError(status, code, message)


_GONE_BODY = '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message></Error>'


def _end_stream_with_error(line: bytes, message: str) -> bytes:
    action = json.loads(line)
    action["endStreamAction"]["errorMessage"] = message
    return json.dumps(action, separators=(",", ":")).encode() + b"\n"


class FaultMiddleware:
    """Applies :class:`Faults` to API calls (under ``prefix``) and file downloads (under ``files_prefix``)."""

    def __init__(self, app: ASGIApp, faults: Faults, prefix: str, files_prefix: str) -> None:
        self.app, self.faults, self.prefix, self.files_prefix = app, faults, prefix, files_prefix

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
            error = injected_error(faults)
            body = json.dumps(error.body()).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            headers += [(k.lower().encode(), v.encode()) for k, v in error.headers.items()]
            await send({"type": "http.response.start", "status": error.status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
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
