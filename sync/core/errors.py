"""The one exception hierarchy of sharesync.

Every failure a user can meet is one of these classes, so the CLI, the Dagster layer
and the retry loops decide by type, never by parsing messages or status codes::

    SharesyncError
    ├─ ConfigError                  bad config / profile file: names the field and the fix   (exit 2)
    ├─ SharingError                 anything the provider side did
    │   ├─ SharingHTTPError(status, error_code, message)   ← http_error_for() maps status → class
    │   │   ├─ BadRequest (400)
    │   │   │   ├─ HistoryUnavailable   the versions asked for are no longer served (vacuumed / log cleaned)
    │   │   │   └─ ChangeFeedRefused    the provider serves no change data feed for the table
    │   │   ├─ Unauthorized (401)
    │   │   ├─ Forbidden (403)
    │   │   ├─ NotFound (404)
    │   │   ├─ RateLimited (429, retry_after)               Retryable
    │   │   └─ ServerError (5xx)                            Retryable
    │   ├─ TransportError           connection refused/reset, timeouts              Retryable
    │   │   └─ ConnectFailed        no connection at all (refused, timed out, no such host): `reason`
    │   ├─ SlowTransfer             an answer slower than the rate floor: abandoned, not retried
    │   ├─ ProtocolViolation        missing Delta-Table-Version, unknown action, bad JSON
    │   │   ├─ TruncatedStream      stream ended without endStreamAction            Retryable
    │   │   └─ VersionMismatch      the answer is labelled with another version than was asked for
    │   ├─ UnsupportedTableFeature  the table needs a Delta reader feature sharesync lacks  Permanent
    │   ├─ UnsupportedAccessMode    the table's access modes and its `access` setting do not meet  Permanent
    │   ├─ StreamError              endStreamAction.errorMessage was set
    │   ├─ AsyncQueryFailed         an asynchronous query failed, or was still pending at the poll timeout
    │   ├─ UrlExpired               presigned URL refused or expired: refresh, then retry
    │   ├─ UnsafeUrl                a file URL at an address sharesync must not fetch  Permanent
    │   └─ DownloadError            file body wrong (size mismatch, over the cap)    Retryable
    ├─ StateError                   the state store
    │   ├─ StateStoreUnavailable    cannot connect / open (names host, never password)
    │   ├─ StateSchemaTooNew        database written by a newer sharesync
    │   ├─ CheckpointConflict       compare-and-swap lost
    │   ├─ RunAlreadyFinished       the run was closed already (e.g. as abandoned by a takeover)
    │   └─ LeaseHeld                another process syncs this table
    └─ SyncError                    the engine refused to apply a plan
        ├─ SchemaIncompatible       breaking schema change (dropped column, type change)
        ├─ ChangeFeedRequired       an append or history target without the provider's change data feed
        └─ TargetError              target path unusable (not Delta, not writable)

``Retryable`` is a marker mixin: retry loops ask ``isinstance(exc, Retryable)``.
``Permanent`` marks errors that must fail a run at once (config, auth, schema).
All messages pass through :func:`sharesync.sync.core.redact.redact` so tokens and URL signatures never leak,
and through :func:`printable`, so text a provider chose (an error message, a table name) cannot
break a message into several lines or send terminal escape sequences.
"""

from __future__ import annotations

from typing import Self

from sharesync.sync.core.redact import redact


class Retryable:
    """Marker: the same call may succeed if tried again later."""


class Permanent:
    """Marker: retrying cannot help; a person has to change something."""


def printable(text: str) -> str:
    """``text`` on one line: control and format characters (line breaks, ESC, bidi overrides)
    written as Python escapes (``\\n``, ``\\x1b``, ``\\u202e``), everything else kept."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class SharesyncError(Exception):
    """Root of every sharesync error. The message is redacted and made printable on construction."""

    def __init__(self, message: str) -> None:
        self.message = printable(redact(message))
        super().__init__(self.message)

    def clone(self) -> Self:
        """A copy to raise again (same class, fields and message; subclasses' constructors differ)."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin.args = self.args
        return twin

    def within(self, prefix: str) -> Self:
        """This error (same class and fields) with ``prefix: `` before its message."""
        named = self.clone()
        named.message = printable(redact(f"{prefix}: {self.message}"))
        named.args = (named.message,)
        return named


class ConfigError(SharesyncError, Permanent):
    """A config or profile file is wrong; the message names the field and the fix."""


class SharingError(SharesyncError):
    """Something went wrong talking to the Delta Sharing provider."""


class SharingHTTPError(SharingError):
    """The server answered with an error status and (usually) an errorCode/message body."""

    status: int = 0

    def __init__(self, status: int, error_code: str | None, message: str, *, context: str = "") -> None:
        self.status = status
        self.error_code = error_code
        self.server_message = redact(message)
        prefix = f"{context}: " if context else ""
        code = f" {error_code}" if error_code else ""
        super().__init__(f"{prefix}HTTP {status}{code}: {message}")


class BadRequest(SharingHTTPError, Permanent):
    status = 400


class HistoryUnavailable(BadRequest):
    """The provider no longer serves the versions asked for (history vacuumed or log cleaned up).

    The planner answers it with a re-bootstrap from a snapshot.
    """


class ChangeFeedRefused(BadRequest):
    """The provider refused a table's change data feed (CDF off, or its history not shared).

    A metadata answer that left the setting out planned changes; this refusal re-plans without them.
    """


class Unauthorized(SharingHTTPError, Permanent):
    status = 401


class Forbidden(SharingHTTPError, Permanent):
    status = 403


class NotFound(SharingHTTPError, Permanent):
    status = 404


class _RetryAfterError(SharingHTTPError):
    """An HTTP error that may carry the server's ``Retry-After`` (seconds)."""

    def __init__(
        self,
        status: int,
        error_code: str | None,
        message: str,
        *,
        context: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, error_code, message, context=context)
        self.retry_after = retry_after


class RateLimited(_RetryAfterError, Retryable):
    status = 429


class ServerError(_RetryAfterError, Retryable):
    status = 500


class TransportError(SharingError, Retryable):
    """The connection failed (refused, reset, timed out) before a full answer arrived."""


class ConnectFailed(TransportError):
    """No connection could be made to ``origin``; ``reason`` says why in a few words ("connection
    refused"), for the retry notices that show a provider that cannot be reached at once."""

    def __init__(self, message: str, *, reason: str, origin: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.origin = origin


class SlowTransfer(SharingError):
    """An answer arrived slower than the transfer-rate floor: abandoned, and not retried at once
    (asking a dripping server again would hold the table for another window)."""


class ProtocolViolation(SharingError):
    """The server's answer breaks the Delta Sharing protocol."""


class VersionMismatch(ProtocolViolation):
    """The answer's version label (``Delta-Table-Version``, ``metaData.version``, a file's version)
    is not the one asked for, or lies outside the range asked for (:mod:`sharesync.sync.protocol.labels`).

    Nothing of such an answer is applied: its rows may be of one version and its label of another.
    """


class UnsupportedTableFeature(SharingError, Permanent):
    """The shared table needs a Delta reader feature sharesync cannot read (e.g. variant types)."""


class UnsupportedAccessMode(SharingError, Permanent):
    """The table's ``accessModes`` and its ``access`` setting have no way of reading in common."""


class TruncatedStream(ProtocolViolation, Retryable):
    """A stream that promised an endStreamAction ended without one."""


class StreamError(SharingError):
    """The server reported a failure inside the stream (endStreamAction.errorMessage)."""


class AsyncQueryFailed(SharingError):
    """An asynchronous query (``asyncquery=true``) failed on the server or outlasted the poll timeout.

    ``query_id`` names the provider's query; the message says whether the next run resumes it.
    """

    def __init__(self, message: str, *, query_id: str) -> None:
        super().__init__(message)
        self.query_id = query_id


class UrlExpired(SharingError, Retryable):
    """A presigned file URL was refused or has expired; ask for a fresh one."""


class UnsafeUrl(SharingError, Permanent):
    """A presigned URL points where the provider should not make sharesync fetch (loopback, metadata)."""


class DownloadError(SharingError, Retryable):
    """A downloaded file does not match what the server declared."""


class StateError(SharesyncError):
    """The state store failed."""


class StateStoreUnavailable(StateError, Retryable):
    """The state database cannot be reached or opened."""


class StateSchemaTooNew(StateError, Permanent):
    """The state database was migrated by a newer sharesync; refuse to write to it."""


class CheckpointConflict(StateError):
    """Another writer advanced the checkpoint first (compare-and-swap lost)."""


class RunAlreadyFinished(StateError):
    """The run to finish is no longer running: another process closed it (as abandoned, after
    taking the table's lease over), so its outcome is on record already."""


class LeaseHeld(StateError, Retryable):
    """Another process holds the sync lease for this table."""


class FencedOut(LeaseHeld):
    """A later holder of the table's lease wrote to its target, so the engine skipped this holder's writes."""


class SyncError(SharesyncError):
    """The engine cannot apply a plan to the target."""


class SchemaIncompatible(SyncError, Permanent):
    """The source schema changed in a way the target cannot follow (dropped column, type change).

    ``change`` says what changed at the provider when that is the cause (None: another mismatch,
    such as a configured column or key the data lacks); ``on_breaking_change: rebuild`` answers
    only the former.
    """

    def __init__(self, message: str, *, change: str | None = None) -> None:
        super().__init__(message)
        self.change = None if change is None else printable(redact(change))


class ChangeFeedRequired(SyncError, Permanent):
    """An append or history target continues only from change rows: a snapshot in their place would
    land as changes that never happened (nothing is written)."""


class TargetError(SyncError, Permanent):
    """The target location is unusable (not a Delta table, not writable)."""


_STATUS_CLASSES: dict[int, type[SharingHTTPError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    429: RateLimited,
}


def http_error_for(
    status: int,
    error_code: str | None,
    message: str,
    *,
    context: str = "",
    retry_after: float | None = None,
) -> SharingHTTPError:
    """Map an HTTP error status to its exception class (the only place that does so)."""
    cls = _STATUS_CLASSES.get(status)
    if cls is RateLimited:
        return RateLimited(status, error_code, message, context=context, retry_after=retry_after)
    if cls is not None:
        return cls(status, error_code, message, context=context)
    if status >= 500 or status in (408, 425):  # Request Timeout, Too Early: RFC 9110/8470 say repeat it
        return ServerError(status, error_code, message, context=context, retry_after=retry_after)
    # Other 4xx (405, 409, 410, 413, …): the request itself is wrong; retrying will not help.
    return BadRequest(status, error_code, message, context=context)


def exception_line(exc: BaseException) -> tuple[str, bool]:
    """``Type: message`` of a library's exception on one line, and whether its message ran on
    past that line (a JVM stack trace after a Spark error, a Rust backtrace after a deltalake one
    with ``RUST_BACKTRACE`` set: the first line is the message, the rest belongs in the log)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}", len(lines) > 1
