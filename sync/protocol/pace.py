"""How slowly a response body may arrive: a bound on the whole body, and a transfer-rate floor.

httpx's read timeout bounds each read, so a server sending a byte per read never times out.
Two rules cut such a body off, both timed with :func:`time.monotonic` as chunks arrive:

* **the deadline** (:class:`Bounds` ``total``): the whole body, from its headers to its last
  byte; a retryable :class:`~sharesync.sync.core.errors.TransportError`, like a dropped connection;
* **the rate floor** (curl's ``--speed-limit``/``--speed-time``): a body arriving slower than
  ``floor_rate`` bytes per second over a window of ``floor_seconds`` is abandoned at the end of
  that window, as a :class:`~sharesync.sync.core.errors.SlowTransfer` — not retried, since asking
  a dripping server again would hold the table for another window.

The window counts only time spent waiting for the network (inside the read), never time the
caller spends between reads, so a slow consumer is not mistaken for a slow provider. Both rules
act when a chunk arrives; a body that sends nothing at all is cut by the read timeout.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Bounds:
    """The limits on one body: ``total`` seconds as a whole, ``floor_rate`` B/s over ``floor_seconds``.

    ``subject`` and ``fix`` only word the error: who was slow ("provider partner (https://…)")
    and what to change to allow a slower provider.
    """

    total: float
    floor_rate: float
    floor_seconds: float
    subject: str = "the server"
    fix: str = "lower SHARESYNC_HTTP_MIN_RATE_BYTES or raise SHARESYNC_HTTP_MIN_RATE_SECONDS"


class TooSlow(httpx.ReadTimeout):
    """The body arrived under the rate floor for a whole window (an httpx error: it is translated
    with the request's context at the same boundary as every other, :mod:`.http_errors`)."""


class RateMeter:
    """Pure: bytes received and seconds waited for them, judged once per window."""

    def __init__(self, floor_rate: float, floor_seconds: float) -> None:
        self.floor_rate, self.floor_seconds = floor_rate, floor_seconds
        self._bytes = 0
        self._waited = 0.0

    def arrived(self, nbytes: int, waited: float) -> float | None:
        """Count a chunk of ``nbytes`` that took ``waited`` seconds; the window's rate when a
        window ends below the floor (abandon the body), else None."""
        self._bytes += nbytes
        self._waited += waited
        if self.floor_rate <= 0 or self._waited < self.floor_seconds:
            return None
        rate = self._bytes / self._waited
        self._bytes, self._waited = 0, 0.0
        return rate if rate < self.floor_rate else None


def _too_slow(bounds: Bounds, rate: float, request: httpx.Request) -> TooSlow:
    return TooSlow(
        f"{bounds.subject} sent the answer at {_rate(rate)}, under the floor of {_rate(bounds.floor_rate)} for "
        f"{bounds.floor_seconds:g} s; abandoned, not retried: it is stalled or far too slow (if it is only slow, "
        f"{bounds.fix})",
        request=request,
    )


def _rate(value: float) -> str:
    return f"{value / 1024:.3g} KiB/s" if value >= 1024 else f"{value:.3g} B/s"


def _past_deadline(bounds: Bounds, request: httpx.Request) -> httpx.ReadTimeout:
    return httpx.ReadTimeout(
        f"the response was not complete after {bounds.total:g} s (the bound on a whole response)", request=request
    )


class _PacedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, request: httpx.Request, bounds: Bounds) -> None:
        self.inner, self.request, self.bounds = inner, request, bounds
        self.deadline = time.monotonic() + bounds.total
        self.meter = RateMeter(bounds.floor_rate, bounds.floor_seconds)

    def __iter__(self) -> Iterator[bytes]:
        chunks = iter(self.inner)
        while True:
            asked = time.monotonic()
            chunk = next(chunks, None)
            now = time.monotonic()
            if chunk is None:
                return
            if now > self.deadline:
                raise _past_deadline(self.bounds, self.request)
            if (rate := self.meter.arrived(len(chunk), now - asked)) is not None:
                raise _too_slow(self.bounds, rate, self.request)
            yield chunk

    def close(self) -> None:
        self.inner.close()


class _AsyncPacedStream(httpx.AsyncByteStream):
    """The rate floor over a download's raw body (a download's deadline is its own, :mod:`.download`)."""

    def __init__(self, inner: httpx.AsyncByteStream, request: httpx.Request, bounds: Bounds) -> None:
        self.inner, self.request, self.bounds = inner, request, bounds
        self.meter = RateMeter(bounds.floor_rate, bounds.floor_seconds)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = aiter(self.inner)
        while True:
            asked = time.monotonic()
            chunk = await anext(chunks, None)
            if chunk is None:
                return
            if (rate := self.meter.arrived(len(chunk), time.monotonic() - asked)) is not None:
                raise _too_slow(self.bounds, rate, self.request)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def pace_hook(bounds: Bounds) -> Callable[[httpx.Response], None]:
    """An httpx response hook applying the deadline and the rate floor to the body."""

    def bound(response: httpx.Response) -> None:
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _PacedStream(response.stream, response.request, bounds)

    return bound


def async_floor_hook(bounds: Bounds) -> Callable[[httpx.Response], Awaitable[None]]:
    """An async httpx response hook applying the rate floor to the raw body (bytes as they arrive,
    before decoding or re-chunking)."""

    async def bound(response: httpx.Response) -> None:
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _AsyncPacedStream(response.stream, response.request, bounds)

    return bound
