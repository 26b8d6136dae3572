"""Requests to one sharing server: headers, credentials, timeouts, and one attempt per call.

:class:`SharingHttp` sends each request with the profile's ``httpx.Auth`` (which fetches, caches
and renews access tokens, and tries once more after a 401) and maps every failure to our errors
through :mod:`sharesync.sync.protocol.http_errors`. Whole calls are retried by
:mod:`sharesync.sync.protocol.retry`; streamed pages keep their retry loop in
:mod:`sharesync.sync.protocol.ndjson` so a broken stream resumes where it broke.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from sharesync.sync.core.errors import ProtocolViolation, Unauthorized
from sharesync.sync.protocol.auth import SharingAuth
from sharesync.sync.protocol.http_errors import read_error, translate_httpx_errors
from sharesync.sync.protocol.pace import Bounds, pace_hook
from sharesync.sync.protocol.retry import RetryPolicy, call_with_retries, env_number
from sharesync.sync.protocol.tls import ssl_context

M = TypeVar("M", bound=BaseModel)

CAPABILITIES_HEADER = "delta-sharing-capabilities"
TABLE_VERSION_HEADER = "Delta-Table-Version"
# Delta Sharing protocol, "Delta Sharing Capabilities Header": we read both response formats (the
# server answers plain tables in parquet, others in delta), the reader features of
# :mod:`sharesync.sync.delta`, and ask for an endStreamAction so a cut stream can be told from a
# complete one (servers that know it echo it back).
REQUEST_CAPABILITIES = (
    "responseformat=delta,parquet;readerfeatures=deletionvectors,columnmapping,timestampntz,typewidening;"
    "includeendstreamaction=true"
)
USER_AGENT = f"sharesync/0.1 httpx/{httpx.__version__}"
# Spec "File ID Hash Header": which scheme the file ids of /query and /changes follow. Sent only
# when configured (a server that does not know it sends no echo, which the spec makes an error).
FILE_ID_HASH_HEADER = "fileidhash"
FileIdScheme = Literal["parquet", "delta"]

# A JSON listing page larger than this is not an answer we can use.
MAX_JSON_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Timeouts:
    """Every request has a connect and a read bound, and bounds on how slowly its body may arrive.

    httpx's timeouts bound each read, so a server sending a byte per read would never time out:
    ``total`` bounds an API response from its headers to its last byte, and a body arriving under
    ``floor_rate`` bytes per second for ``floor_seconds`` is abandoned (:mod:`.pace`). A file
    download may take ``total`` plus its size at ``min_rate`` bytes per second
    (:meth:`download_deadline`), and is held to the same rate floor.
    """

    connect: float = 10.0
    read: float = 120.0
    write: float = 60.0
    pool: float = 30.0
    total: float = 600.0
    min_rate: float = 256 * 1024
    floor_rate: float = 1024.0
    floor_seconds: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Timeouts:
        """Defaults, overridden by ``SHARESYNC_HTTP_DEADLINE_SECONDS`` (``total``),
        ``SHARESYNC_HTTP_MIN_RATE_BYTES`` and ``SHARESYNC_HTTP_MIN_RATE_SECONDS`` (the rate floor)."""
        env = os.environ if environ is None else environ
        return cls(
            total=env_number(env, "SHARESYNC_HTTP_DEADLINE_SECONDS", float, cls.total),
            floor_rate=env_number(env, "SHARESYNC_HTTP_MIN_RATE_BYTES", float, cls.floor_rate),
            floor_seconds=env_number(env, "SHARESYNC_HTTP_MIN_RATE_SECONDS", float, cls.floor_seconds),
        )

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)

    def download_deadline(self, size: int) -> float:
        """Seconds a download of ``size`` bytes may take as a whole."""
        return self.total + size / self.min_rate

    def bounds(self, subject: str, provider: str | None) -> Bounds:
        """The pace rules for bodies from ``subject`` (who is named when one is too slow)."""
        where = f"under providers.{provider} in the config" if provider else "for the provider in the config"
        fix = (
            f"lower 'min_rate_bytes_per_second' or raise 'min_rate_seconds' {where}, or "
            "SHARESYNC_HTTP_MIN_RATE_BYTES / SHARESYNC_HTTP_MIN_RATE_SECONDS for every provider"
        )
        return Bounds(self.total, self.floor_rate, self.floor_seconds, subject=subject, fix=fix)


def provider_subject(provider: str | None, endpoint: str) -> str:
    """How errors and retry notices name a provider: ``provider partner (https://host:port)``."""
    url = httpx.URL(endpoint)
    origin = f"{url.scheme}://{url.netloc.decode('ascii', errors='replace')}"
    return f"provider {provider} ({origin})" if provider else f"the provider ({origin})"


def build_http_client(
    *,
    ca_bundle: Path | None = None,
    timeouts: Timeouts | None = None,
    transport: httpx.BaseTransport | None = None,
    subject: str = "the provider",
    provider: str | None = None,
) -> httpx.Client:
    """The API client. Redirects are followed: httpx drops ``Authorization`` from a redirect that
    leaves the origin (scheme, host, port), so a credential never reaches another host. Every
    response body is held to :func:`~.pace.pace_hook`'s rules, over an injected ``transport`` too;
    ``subject`` and ``provider`` word the error when one is too slow."""
    timeouts = timeouts or Timeouts.from_env()
    return httpx.Client(
        verify=ssl_context(ca_bundle),
        timeout=timeouts.to_httpx(),
        transport=transport,
        event_hooks={"response": [pace_hook(timeouts.bounds(subject, provider))]},
        headers={"User-Agent": USER_AGENT},
        follow_redirects=True,
    )


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

    def __init__(self, endpoint: str, auth: SharingAuth, http: httpx.Client, retry: RetryPolicy) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth
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
        file_id_hash: FileIdScheme | None = None,
        asyncquery: bool = False,
    ) -> Iterator[httpx.Response]:
        """One attempt: send, and yield the streamed 2xx response (closed on exit) or raise.

        ``asyncquery`` adds ``asyncquery=true`` to the capabilities (spec "asyncQuery")."""
        headers = {"User-Agent": USER_AGENT}
        if capabilities:
            headers[CAPABILITIES_HEADER] = REQUEST_CAPABILITIES + (";asyncquery=true" if asyncquery else "")
        if file_id_hash is not None:
            headers[FILE_ID_HASH_HEADER] = file_id_hash
        content = json.dumps(dict(body)).encode() if body is not None else None
        if content is not None:
            headers["Content-Type"] = "application/json; charset=utf-8"
        with translate_httpx_errors(context):
            request = self.http.build_request(method, url, params=params, content=content, headers=headers)
        with translate_httpx_errors(context, sent=request):
            response = self.http.send(request, stream=True, auth=self.auth)
        try:
            if not response.is_success:
                hint = self.auth.unauthorized_hint() if response.status_code == Unauthorized.status else ""
                raise read_error(response, context=context, hint=hint)
            yield response
        finally:
            response.close()

    def get_json(
        self,
        url: str,
        model: type[M],
        *,
        context: str,
        params: Mapping[str, str | int] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> M:
        """GET (or, with ``body``, POST) a JSON document into ``model``, with retries."""
        method = "GET" if body is None else "POST"

        def attempt() -> M:
            with (
                self.open(method, url, params=params, body=body, context=context) as response,
                translate_httpx_errors(context),
            ):
                answer = read_bounded(response, MAX_JSON_BYTES, context)
            try:
                return model.model_validate_json(answer)
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


def read_bounded(response: httpx.Response, limit: int, context: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            raise ProtocolViolation(f"{context}: response larger than {limit // (1024 * 1024)} MiB")
        chunks.append(chunk)
    return b"".join(chunks)
