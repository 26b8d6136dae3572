"""Transport for the sharing server: timeouts, TLS, retries and the one error-mapping boundary.

Everything that can go wrong on the wire becomes a :mod:`sharesync.sync.core.errors` class here, and only
here: httpx exceptions (whose texts may carry presigned URLs) are translated with their text
redacted and their chain cut (``from None``); error statuses are mapped by
:func:`sharesync.sync.core.errors.http_error_for` with the server's ``errorCode``/``message``. Retry loops
ask ``isinstance(exc, Retryable)``; tenacity decides how long to wait (exponential backoff
with jitter, ``Retry-After`` honoured) and when to give up (attempts or a total time bound).
The loops themselves stay in the callers so that streamed pages can resume where they broke.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

import httpx
import tenacity
from pydantic import BaseModel, ValidationError

from sharesync.sync.core.errors import (
    BadRequest,
    ConfigError,
    HistoryUnavailable,
    ProtocolViolation,
    Retryable,
    SharesyncError,
    SharingHTTPError,
    TransportError,
    Unauthorized,
    http_error_for,
)
from sharesync.sync.core.redact import redact
from sharesync.sync.protocol.wire import ErrorBody

if TYPE_CHECKING:
    from sharesync.sync.protocol.profile import Credentials

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

CAPABILITIES_HEADER = "delta-sharing-capabilities"
TABLE_VERSION_HEADER = "Delta-Table-Version"
# Spec "Delta Sharing Capabilities Header": we read parquet only, and ask for an endStreamAction
# so a cut stream can be told from a complete one (servers that know it echo it back).
REQUEST_CAPABILITIES = "responseformat=parquet;includeendstreamaction=true"
USER_AGENT = f"sharesync/0.1 httpx/{httpx.__version__}"

# A JSON listing page or an error body larger than this is not an answer we can use.
MAX_JSON_BYTES = 64 * 1024 * 1024
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


# ---------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Timeouts:
    """Every request has a connect and a read bound; a stalled server never hangs a run."""

    connect: float = 10.0
    read: float = 120.0
    write: float = 60.0
    pool: float = 30.0

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


async def _async_sleep(seconds: float) -> None:
    import asyncio  # here, not at the top: only downloads are async, and a no-op sync never imports asyncio

    await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How long to keep trying a Retryable failure. ``sleep``/``clock`` are injectable for tests."""

    max_attempts: int = 8
    total_seconds: float = 120.0
    initial_backoff: float = 0.5
    max_backoff: float = 30.0
    sleep: Callable[[float], None] = field(default=_sleep, repr=False, compare=False)
    async_sleep: Callable[[float], Awaitable[None]] = field(default=_async_sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        """Defaults, overridden by ``SHARESYNC_RETRY_MAX_ATTEMPTS`` / ``SHARESYNC_RETRY_TOTAL_SECONDS``."""
        env = os.environ if environ is None else environ
        kwargs: dict[str, Any] = {}
        for name, key, kind in (
            ("max_attempts", "SHARESYNC_RETRY_MAX_ATTEMPTS", int),
            ("total_seconds", "SHARESYNC_RETRY_TOTAL_SECONDS", float),
        ):
            if env.get(key):
                try:
                    kwargs[name] = kind(env[key])
                except ValueError:
                    raise ConfigError(f"{key}={env[key]!r} is not a number; unset it or give e.g. 5") from None
        return cls(**kwargs)

    def budget(self, context: str) -> RetryBudget:
        return RetryBudget(self, context)


class RetryBudget:
    """The retry state of one logical call; the caller's loop does the I/O, tenacity decides.

    ``failed(exc)`` either waits before the next attempt or re-raises ``exc`` — when it is not
    Retryable, when the attempts are used up, or when the next wait would cross the total bound.
    Only tenacity's strategies are used (not its loop), so a budget can move between threads
    and live inside a generator that resumes a broken stream.
    """

    def __init__(self, policy: RetryPolicy, context: str) -> None:
        self.policy = policy
        self.context = context
        self.attempts = 1
        self.waited = 0.0
        start = policy.clock()

        out_of_attempts = tenacity.stop_after_attempt(policy.max_attempts)

        def stop(state: tenacity.RetryCallState) -> bool:
            # Stop before a wait that would cross the total bound, not after it.
            return out_of_attempts(state) or policy.clock() - start + state.upcoming_sleep > policy.total_seconds

        self._wait = _wait_for(policy)
        self._stop = stop
        self._state = tenacity.RetryCallState(tenacity.Retrying(), fn=None, args=(), kwargs={})

    def next_wait(self, exc: BaseException) -> float:
        """Seconds to wait before trying again; raises ``exc`` if there is no next attempt."""
        if not isinstance(exc, Retryable):
            raise exc
        self._state.set_exception((type(exc), exc, exc.__traceback__))
        self._state.upcoming_sleep = wait = self._wait(self._state)
        if self._stop(self._state):
            raise exc
        self._state.prepare_for_next_attempt()
        self.attempts += 1
        self.waited += wait
        logger.info(  # info, not warning: a retried call that then succeeds is routine
            "%s failed (%s); attempt %d of %d in %.2fs",
            self.context,
            redact(str(exc)),
            self.attempts,
            self.policy.max_attempts,
            wait,
        )
        return wait

    def failed(self, exc: BaseException) -> None:
        self.policy.sleep(self.next_wait(exc))

    async def failed_async(self, exc: BaseException) -> None:
        await self.policy.async_sleep(self.next_wait(exc))


def _wait_for(policy: RetryPolicy) -> Callable[[tenacity.RetryCallState], float]:
    jittered = tenacity.wait_random_exponential(multiplier=policy.initial_backoff, max=policy.max_backoff)

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            return float(retry_after)  # the server said when; never earlier (RFC 9110 §10.2.3)
        return float(jittered(state))

    return wait


def call_with_retries(policy: RetryPolicy, context: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` until it succeeds or the budget says stop."""
    budget = policy.budget(context)
    while True:
        try:
            return attempt()
        except SharesyncError as exc:
            budget.failed(exc)


# ---------------------------------------------------------------- clients


class DeferredTrustContext(ssl.SSLContext):
    """httpx's default trust (``verify=True``), read when the first TLS connection starts.

    Reading the CA bundle costs 30-40 ms, which a client that only speaks plain http (a local
    provider, the demo server) or makes no call at all should not pay when it is built. The
    context verifies from the start exactly like ``ssl.create_default_context`` (certificate
    required, host name checked); only loading the trusted CAs waits for the first
    ``wrap_socket``/``wrap_bio``, which every TLS connection (direct or through a proxy) goes
    through. The CAs are those httpx would load: ``SSL_CERT_FILE``, else ``SSL_CERT_DIR``,
    else certifi's bundle. A CA file that cannot be read is a :class:`ConfigError`.
    """

    def __new__(cls) -> DeferredTrustContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self) -> None:
        # What ssl.create_default_context(cafile=...) sets besides the CAs (Python 3.11).
        self.verify_mode = ssl.CERT_REQUIRED
        self.check_hostname = True
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:
            self.keylog_filename = keylog
        # httpx reads these when the client is built; so do we.
        self._cafile = os.environ.get("SSL_CERT_FILE") or None
        self._capath = None if self._cafile else os.environ.get("SSL_CERT_DIR") or None
        self._trust_lock = threading.Lock()
        self._trust_loaded = False

    def _load_trust(self) -> None:
        with self._trust_lock:
            if self._trust_loaded:
                return
            cafile, capath = self._cafile, self._capath
            if cafile is None and capath is None:
                import certifi

                cafile = certifi.where()
            try:
                self.load_verify_locations(cafile=cafile, capath=capath)
            except (ssl.SSLError, OSError) as exc:
                source = (
                    f"SSL_CERT_FILE '{cafile}'" if self._cafile else f"SSL_CERT_DIR '{capath}'" if capath else cafile
                )
                raise ConfigError(f"cannot load trusted certificates from {source} ({exc})") from None
            self._trust_loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._load_trust()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._load_trust()
        return super().wrap_bio(*args, **kwargs)


def ssl_context(ca_bundle: Path | None) -> ssl.SSLContext:
    """System trust store, plus the provider's CA bundle when one is configured. Never off.

    Without a CA bundle: httpx's default trust, loaded on first TLS use
    (:class:`DeferredTrustContext`); a configured bundle is loaded (and checked) at once.
    """
    if ca_bundle is None:
        return DeferredTrustContext()
    context = ssl.create_default_context()
    try:
        context.load_verify_locations(cafile=str(ca_bundle))
    except FileNotFoundError:
        raise ConfigError(f"ca_bundle '{ca_bundle}' does not exist; fix the path or remove 'ca_bundle'") from None
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"ca_bundle '{ca_bundle}' is not a PEM certificate file ({exc})") from None
    return context


def build_http_client(
    *,
    ca_bundle: Path | None = None,
    timeouts: Timeouts | None = None,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    return httpx.Client(
        verify=ssl_context(ca_bundle),
        timeout=(timeouts or Timeouts()).to_httpx(),
        transport=transport,
        headers={"User-Agent": USER_AGENT},
        follow_redirects=False,
    )


# ---------------------------------------------------------------- error mapping


@contextmanager
def translate_httpx_errors(context: str) -> Iterator[None]:
    """The one boundary where httpx exceptions become ours (like httpx's map_httpcore_exceptions).

    httpx texts may carry a presigned URL, so the message is redacted and the raw exception is
    not chained (``from None``): a traceback must not leak what the message hides.
    """
    try:
        yield
    except httpx.TimeoutException as exc:
        raise TransportError(
            f"{context}: timed out ({type(exc).__name__}: {redact(str(exc)) or 'no detail'})"
        ) from None
    except httpx.ConnectError as exc:
        untrusted = _certificate_problem(exc)
        if untrusted is not None:  # retrying cannot help: a person must trust the certificate (or not)
            raise ConfigError(
                f"{context}: the server's TLS certificate was not accepted ({redact(untrusted)}); if the provider "
                "uses a private or self-signed certificate authority, set 'ca_bundle' in the config to its PEM file"
            ) from None
        raise TransportError(
            f"{context}: connection failed ({type(exc).__name__}: {redact(str(exc)) or 'no detail'})"
        ) from None
    except httpx.TransportError as exc:
        raise TransportError(
            f"{context}: connection failed ({type(exc).__name__}: {redact(str(exc)) or 'no detail'})"
        ) from None
    except httpx.DecodingError as exc:  # a body that does not decode (gzip cut short): fetch it again
        raise TransportError(f"{context}: the response body did not decode ({redact(str(exc))})") from None
    except httpx.TooManyRedirects as exc:
        raise ProtocolViolation(f"{context}: too many redirects ({redact(str(exc))})") from None
    except httpx.InvalidURL as exc:
        raise ConfigError(f"{context}: invalid URL ({redact(str(exc))}); check the profile's endpoint") from None


def _certificate_problem(exc: BaseException) -> str | None:
    """The reason a TLS certificate was refused, if that is why the connection failed."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return current.verify_message or str(current)
        current = current.__cause__ or current.__context__
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


def looks_like_history_unavailable(message: str) -> bool:
    lowered = message.lower()
    return any(phrase in lowered for phrase in HISTORY_UNAVAILABLE_PHRASES)


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
    except ValidationError:
        snippet = " ".join(text.split())[:_ERROR_SNIPPET_CHARS]
        message = f"non-JSON error body: {redact(snippet)!r}" if snippet else "empty error body"
    if not message:
        message = httpx.codes.get_reason_phrase(status) or "no message"
    if hint:
        message = f"{message} ({hint})"
    retry_after = parse_retry_after(headers.get("Retry-After"))
    if status == BadRequest.status and looks_like_history_unavailable(message):
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


def parse_capabilities(value: str | None) -> dict[str, str]:
    """``responseformat=parquet;includeendstreamaction=true`` → dict; keys and values lower-cased."""
    result: dict[str, str] = {}
    for part in (value or "").lower().split(";"):
        key, sep, val = part.partition("=")
        if sep and key.strip():
            result[key.strip()] = val.strip()
    return result


def table_version_header(headers: httpx.Headers, context: str) -> int:
    """The ``Delta-Table-Version`` header; the spec makes it mandatory, so absence is a violation."""
    raw = headers.get(TABLE_VERSION_HEADER)
    if raw is None:
        raise ProtocolViolation(f"{context}: the server sent no {TABLE_VERSION_HEADER} header")
    try:
        version = int(raw.strip())
    except ValueError:
        raise ProtocolViolation(f"{context}: {TABLE_VERSION_HEADER} header {raw!r} is not a number") from None
    if version < 0:
        raise ProtocolViolation(f"{context}: {TABLE_VERSION_HEADER} header {raw!r} is negative")
    return version


def quote_segment(name: str) -> str:
    """A share/schema/table name as one URL path segment (names may hold spaces or slashes)."""
    return quote(name, safe="")


# ---------------------------------------------------------------- the session


class SharingHttp:
    """Sends requests to one sharing server with its credentials; maps every failure to our errors."""

    def __init__(self, endpoint: str, credentials: Credentials, http: httpx.Client, retry: RetryPolicy) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.credentials = credentials
        self.http = http
        self.retry = retry

    def __repr__(self) -> str:
        return f"SharingHttp(endpoint={self.endpoint!r})"

    def url(self, *segments: str) -> str:
        return self.endpoint + "/" + "/".join(quote_segment(s) for s in segments)

    @contextmanager
    def open(
        self,
        method: str,
        url: str,
        *,
        context: str,
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
        capabilities: bool = False,
    ) -> Iterator[httpx.Response]:
        """One attempt: send, and yield the streamed 2xx response (closed on exit) or raise."""
        for auth_attempt in (1, 2):
            headers = {"User-Agent": USER_AGENT, **self.credentials.auth_header()}
            if capabilities:
                headers[CAPABILITIES_HEADER] = REQUEST_CAPABILITIES
            content = json.dumps(dict(body)).encode() if body is not None else None
            if content is not None:
                headers["Content-Type"] = "application/json; charset=utf-8"
            with translate_httpx_errors(context):
                request = self.http.build_request(method, url, params=params, content=content, headers=headers)
                response = self.http.send(request, stream=True)
            try:
                if response.is_success:
                    yield response
                    return
                error = read_error(response, context=context, hint=self._hint(response.status_code))
            finally:
                response.close()
            # An OAuth access token can be revoked before its stated expiry: fetch a new one once.
            if isinstance(error, Unauthorized) and auth_attempt == 1 and self.credentials.invalidate():
                logger.info("%s: 401, fetching a fresh access token and trying once more", context)
                continue
            raise error

    def get_json(self, url: str, model: type[M], *, context: str, params: Mapping[str, str | int] | None = None) -> M:
        """GET a JSON document into ``model``, with retries."""

        def attempt() -> M:
            with self.open("GET", url, params=params, context=context) as response, translate_httpx_errors(context):
                body = _read_bounded(response, MAX_JSON_BYTES, context)
            try:
                return model.model_validate_json(body)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors(include_url=False)[:3]
                )
                raise ProtocolViolation(f"{context}: unexpected response ({problems})") from None

        return call_with_retries(self.retry, context, attempt)

    def get_headers(self, url: str, *, context: str, params: Mapping[str, str | int] | None = None) -> httpx.Headers:
        """GET a response whose meaning is in its headers (Query Table Version), with retries."""

        def attempt() -> httpx.Headers:
            with self.open("GET", url, params=params, context=context) as response:
                return response.headers

        return call_with_retries(self.retry, context, attempt)

    def _hint(self, status: int) -> str:
        if status == Unauthorized.status:
            return self.credentials.unauthorized_hint()
        return ""


def _read_bounded(response: httpx.Response, limit: int, context: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise ProtocolViolation(f"{context}: response larger than {limit // (1024 * 1024)} MiB")
        chunks.append(chunk)
    return b"".join(chunks)
