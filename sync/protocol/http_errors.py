"""The one boundary where HTTP failures become :mod:`sharesync.sync.core.errors` classes.

httpx exceptions (whose texts may carry presigned URLs) are translated with their text redacted
and their chain cut (``from None``); error statuses are mapped by
:func:`sharesync.sync.core.errors.http_error_for` with the server's ``errorCode``/``message``,
except that an answer saying the asked-for versions are gone becomes ``HistoryUnavailable``
(answered by re-bootstrapping, not by failing): recognised by its shape — the error code a
reference server sends with a message pattern of that error, or a Delta error condition
(``[DELTA_…]``) that means lost history — and by a list of known wordings.
"""

from __future__ import annotations

import email.utils
import re
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError

from sharesync.sync.core.errors import (
    BadRequest,
    ChangeFeedRefused,
    ConfigError,
    ConnectFailed,
    HistoryUnavailable,
    NotFound,
    ProtocolViolation,
    SharesyncError,
    SharingHTTPError,
    SlowTransfer,
    TransportError,
    http_error_for,
)
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.pace import TooSlow
from sharesync.sync.protocol.wire import ErrorBody

_ERROR_SNIPPET_BYTES = 4096
_ERROR_SNIPPET_CHARS = 200

# Wordings of "the versions you asked for are gone" (answered by re-bootstrapping, not by failing):
# our local server, and the reference server (io.delta.sharing.server, delta-standalone/kernel).
HISTORY_UNAVAILABLE_PHRASES = (
    "is not available",  # local server: "version N is not available (history cleaned up)"
    "no longer available",
    "change data was not recorded for version",  # DeltaCDFErrors.changeDataNotRecordedException
    "you can only query table data since version",  # reference server: tableConfig.startVersion
    "cannot time travel delta table to version",  # delta-standalone versionNotExistException
    "is before the earliest version available",  # delta-standalone timestampEarlierThanCommitRetention
    "transaction log has been truncated",  # delta-kernel versionBeforeFirstAvailableCommit
    "table files missing",  # reference server: FileNotFoundException (data files vacuumed)
)


@contextmanager
def translate_httpx_errors(context: str, *, sent: httpx.Request | None = None) -> Iterator[None]:
    """The one boundary where httpx exceptions become ours (like httpx's map_httpcore_exceptions).

    httpx texts may carry a presigned URL, so the message is redacted and the raw exception is
    not chained (``from None``): a traceback must not leak what the message hides. ``sent`` is
    the request being sent: a failure of another one (a token endpoint's, a redirect's) names it.
    """
    try:
        yield
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        error = _translated(exc, context if sent is None else _naming_other_url(context, sent, exc))
        if error is None:
            raise
        raise error from None


def _translated(exc: httpx.HTTPError | httpx.InvalidURL, context: str) -> SharesyncError | None:
    detail = redact(str(exc))
    if isinstance(exc, TooSlow):  # under the rate floor: not retried (a drip is not a dropped connection)
        return SlowTransfer(f"{context}: {detail}")
    if isinstance(exc, httpx.ConnectTimeout | httpx.ConnectError) and (reason := _connect_failure(exc)) is not None:
        origin = _origin(exc)
        message = f"{context}: {reason} ({origin}; {type(exc).__name__}: {detail})"
        return ConnectFailed(message, reason=reason, origin=origin)
    if isinstance(exc, httpx.TimeoutException):
        return TransportError(f"{context}: timed out ({type(exc).__name__}: {detail or 'no detail'})")
    if isinstance(exc, httpx.ConnectError) and (untrusted := _certificate_problem(exc)) is not None:
        # retrying cannot help: a person must trust the certificate (or not)
        return ConfigError(
            f"{context}: the server's TLS certificate was not accepted ({redact(untrusted)}); if the provider "
            "uses a private or self-signed certificate authority, set 'ca_bundle' in the config to its PEM file"
        )
    # Refused before anything was sent: the same request would fail the same way again.
    if isinstance(exc, httpx.LocalProtocolError):  # an illegal header value: a token with a line break
        return ConfigError(f"{context}: the request could not be sent ({detail}); check the profile's token")
    if isinstance(exc, httpx.UnsupportedProtocol):  # a URL the server gave that is not http(s)
        return ProtocolViolation(f"{context}: not an http(s) URL ({detail})")
    if isinstance(exc, httpx.TransportError):
        return TransportError(f"{context}: connection failed ({type(exc).__name__}: {detail or 'no detail'})")
    if isinstance(exc, httpx.DecodingError):  # a body that does not decode (gzip cut short): fetch it again
        return TransportError(f"{context}: the response body did not decode ({detail})")
    if isinstance(exc, httpx.TooManyRedirects):
        return ProtocolViolation(f"{context}: too many redirects ({detail})")
    if isinstance(exc, httpx.InvalidURL):
        return ConfigError(f"{context}: invalid URL ({detail}); check the profile's endpoint")
    return None


def _connect_failure(exc: httpx.ConnectTimeout | httpx.ConnectError) -> str | None:
    """A few words for why no connection was made; None for a TLS certificate refusal (not ours to say)."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "connection timed out"
    if _certificate_problem(exc) is not None:
        return None
    causes = _causes(exc)
    text = str(exc).lower()
    if any(isinstance(c, ConnectionRefusedError) for c in causes) or "refused" in text:
        return "connection refused"
    if any(isinstance(c, socket.gaierror) for c in causes) or "name or service not known" in text:
        return "host name not found"
    return "cannot connect"


def _origin(exc: httpx.HTTPError) -> str:
    try:
        url = exc.request.url
    except RuntimeError:  # an httpx error raised outside a request has none
        return "no address"
    return f"{url.scheme}://{url.netloc.decode('ascii', errors='replace')}"


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not c for c in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _naming_other_url(context: str, sent: httpx.Request, exc: httpx.HTTPError | httpx.InvalidURL) -> str:
    try:
        failed = exc.request.url.copy_with(query=None) if isinstance(exc, httpx.HTTPError) else None
    except RuntimeError:  # an httpx error raised outside a request has none
        failed = None
    if failed is None or failed == sent.url.copy_with(query=None):
        return context
    return f"{context} (calling {failed})"


def _certificate_problem(exc: BaseException) -> str | None:
    """The reason a TLS certificate was refused, if that is why the connection failed."""
    for current in _causes(exc):
        if isinstance(current, ssl.SSLCertVerificationError):
            return current.verify_message or str(current)
    text = str(exc)
    return text if "CERTIFICATE_VERIFY_FAILED" in text else None


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds: either delay-seconds or an HTTP-date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())


# Delta error conditions that mean "the history asked for is gone" (in an errorCode, or as
# "[CONDITION]" in a message): vacuumed change-data or data files, a cleaned-up log.
HISTORY_CONDITIONS = frozenset(
    {
        "DELTA_CHANGE_DATA_FILE_NOT_FOUND",
        "DELTA_TRUNCATED_TRANSACTION_LOG",
        "DELTA_MISSING_CHANGE_DATA",
        "DELTA_MISSING_FILES_UNEXPECTED_VERSION",
        "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION",
        "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION",
        "DELTA_VERSIONS_NOT_CONTIGUOUS",
    }
)
_CONDITION = re.compile(r"\[([A-Z][A-Z0-9_]+)(?:\.[A-Z0-9_]+)*\]")

# The reference servers' history errors: errorCode → what its message then says.
# (delta-io/delta-sharing: FileNotFoundException of vacuumed files; on Delta Kernel a cleaned-up
# log; on Delta Standalone a version the log no longer reaches.)
_HISTORY_SHAPES: dict[str, re.Pattern[str]] = {
    "RESOURCE_DOES_NOT_EXIST": re.compile(r"\btable files missing\b|\bhas been (?:cleaned up|vacuumed)\b", re.I),
    "MALFORMED_REQUEST": re.compile(
        r"transaction log has been truncated|earliest available version is \d+|\bhas been cleaned up\b", re.I
    ),
    "INVALID_PARAMETER_VALUE": re.compile(
        r"cannot time travel delta table to version \d+|available versions: \[\d+, *\d+\]"
        r"|is before the earliest version available|\bhas been (?:cleaned up|vacuumed)\b",
        re.I,
    ),
}


def has_history_error_shape(message: str, error_code: str | None) -> bool:
    """Whether an error's code and message have the shape of a lost-history error."""
    code = (error_code or "").upper()
    if code in HISTORY_CONDITIONS or any(m.group(1) in HISTORY_CONDITIONS for m in _CONDITION.finditer(message)):
        return True
    shape = _HISTORY_SHAPES.get(code)
    return shape is not None and shape.search(message) is not None


# The reference server's refusal of /changes (and of version queries) on a table without a shared
# change data feed: INVALID_PARAMETER_VALUE with one of these messages (DeltaSharingService).
_NO_FEED = re.compile(r"\bcdf is not enabled\b|change data feed is not enabled|history sharing is not enabled", re.I)


def refuses_change_feed(message: str, error_code: str | None) -> bool:
    """Whether an error answer says the table has no change data feed to serve."""
    code = (error_code or "INVALID_PARAMETER_VALUE").upper()
    return code == "INVALID_PARAMETER_VALUE" and _NO_FEED.search(message) is not None


def looks_like_history_unavailable(message: str, error_code: str | None = None) -> bool:
    """Whether an error answer says the versions asked for are no longer served."""
    if has_history_error_shape(message, error_code):
        return True
    lowered = message.lower()
    return any(phrase in lowered for phrase in HISTORY_UNAVAILABLE_PHRASES)


class _OAuthErrorBody(BaseModel):
    model_config = ConfigDict(extra="ignore", defer_build=True)

    error: str | None = None
    error_description: str | None = None


def error_from_parts(
    status: int, headers: httpx.Headers, body: bytes, *, context: str, hint: str = ""
) -> SharingHTTPError:
    """Map a status and (the start of) an error body to the exception class for it."""
    error_code: str | None = None
    message = ""
    text = body.decode("utf-8", errors="replace")
    try:
        parsed = ErrorBody.model_validate_json(body)
        error_code, message = parsed.error_code, parsed.message or ""
        if error_code is None and not message:  # a token endpoint's answer (RFC 6749 §5.2)?
            oauth = _OAuthErrorBody.model_validate_json(body)
            error_code, message = oauth.error, oauth.error_description or ""
    except ValidationError:
        snippet = " ".join(text.split())[:_ERROR_SNIPPET_CHARS]
        message = f"non-JSON error body: {redact(snippet)!r}" if snippet else "empty error body"
    if not message:
        message = httpx.codes.get_reason_phrase(status) or "no message"
    if hint:
        message = f"{message} ({hint})"
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if status == BadRequest.status and looks_like_history_unavailable(message, error_code):
        return HistoryUnavailable(status, error_code, message, context=context)
    if status == BadRequest.status and refuses_change_feed(message, error_code):
        return ChangeFeedRefused(status, error_code, message, context=context)
    if status == NotFound.status and has_history_error_shape(message, error_code):  # e.g. RESOURCE_DOES_NOT_EXIST
        return HistoryUnavailable(status, error_code, message, context=context)
    return http_error_for(status, error_code, message, context=context, retry_after=retry_after)


def read_error(response: httpx.Response, *, context: str, hint: str = "") -> SharingHTTPError:
    """The error for a failed response, reading at most a few KiB of its (possibly streamed) body."""
    body = b""
    with translate_httpx_errors(context):
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= _ERROR_SNIPPET_BYTES:
                    break
        except httpx.StreamConsumed:  # already read by the caller
            body = response.content
        except httpx.TransportError:
            pass  # the status alone still says what happened
    return error_from_parts(
        response.status_code, response.headers, body[:_ERROR_SNIPPET_BYTES], context=context, hint=hint
    )


async def aread_error(response: httpx.Response, *, context: str) -> SharingHTTPError:
    body = b""
    try:
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) >= _ERROR_SNIPPET_BYTES:
                break
    except httpx.HTTPError:
        pass
    return error_from_parts(response.status_code, response.headers, body[:_ERROR_SNIPPET_BYTES], context=context)
