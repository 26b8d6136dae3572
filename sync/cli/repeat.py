"""``sharesync sync --every``: sync passes in one long-lived process.

A pass in a fresh process pays about a second before any row moves — the interpreter, imports
(pyspark's client imports pandas and gRPC) and the embedded engine's start (bench/README.md).
A process that keeps running pays that once: the Spark session, the engine and the state
store's connection pool are cached per settings and outlive a pass. Passes start ``every``
seconds apart (start to start; the next starts at once when one took longer). The first
Ctrl+C or SIGTERM lets the running pass finish — it is never half-applied either way, but a
finished pass needs no repeating — and a second one stops at once.

The scheduling here is pure (a clock and an event come in) so it is tested without a network.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

_INTERVAL = re.compile(r"(?P<amount>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)?")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_interval(text: str) -> float:
    """Seconds in ``30``, ``30s``, ``1.5m``, ``1h`` or ``500ms``."""
    match = _INTERVAL.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an interval: write a number of seconds, or one with a unit (30s, 5m, 1h)")
    return float(match["amount"]) * _SECONDS[match["unit"] or "s"]


def run_passes(
    run_pass: Callable[[int], None],
    every: float,
    stop: threading.Event,
    *,
    passes: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Call ``run_pass(1)``, ``run_pass(2)``, … ``every`` seconds apart until ``stop`` is set or
    ``passes`` ran; the number of passes run."""
    count = 0
    while not stop.is_set():
        started = clock()
        count += 1
        run_pass(count)
        if passes is not None and count >= passes:
            break
        stop.wait(max(0.0, started + every - clock()))
    return count


@contextmanager
def stop_on_signals(stop: threading.Event, announce: Callable[[str], None]) -> Iterator[None]:
    """While inside: SIGINT and SIGTERM set ``stop`` (and ``announce`` it); a second one raises
    :class:`KeyboardInterrupt`, as an untouched Ctrl+C would. Main thread only (Python's rule)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        announce(f"{signal.Signals(signum).name}: stopping after this pass (again to stop now)")

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
