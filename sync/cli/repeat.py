"""``sharesync sync --every``: sync passes in one long-lived process.

A pass in a fresh process pays about a second before any row moves — the interpreter, imports
(pyspark's client imports pandas and gRPC) and the embedded engine's start (bench/README.md).
A process that keeps running pays that once: the Spark session, the engine and the state
store's connection pool are cached per settings and outlive a pass. Passes start ``every``
seconds apart (start to start; the next starts at once when one took longer). The first
Ctrl+C or SIGTERM lets the running pass finish — it is never half-applied either way, but a
finished pass needs no repeating — and a second one interrupts the pass as Ctrl+C interrupts
``sharesync sync`` (running tables finish their batch, none starts).

The embedded engine keeps memory from pass to pass (measured: Sail 0.7's server grows by tens
of MiB per pass with changes, whether in-process or as a separate server, sessions closed or
not; bench/README.md), so a process above its memory bound restarts itself before the next
pass: :class:`RestartProcess` reaches the console script, which executes the same command
again (same PID, so a supervisor sees one service) with the pass count carried over; a stop
signalled while it does so is held for the fresh process, which then stops before its first pass.

The scheduling here is pure (a clock and a sleep come in) so it is tested without a network.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

# Set across a restart, as "<pid>:<passes done>": only the same process (execve keeps the PID)
# numbers on; a value inherited from elsewhere is ignored.
PASSES_DONE_VARIABLE = "SHARESYNC_PASSES_DONE"
MIN_INTERVAL_SECONDS = 1.0  # a shorter --every is refused: passes back to back, a busy loop
_SLICE_SECONDS = 0.2  # a stop request ends the wait between passes within this
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_INTERVAL = re.compile(r"(?P<amount>\d+(?:\.\d+)?)(?P<unit>ms|s|m|h)?")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_interval(text: str) -> float:
    """Seconds in ``30``, ``30s``, ``1.5m``, ``1h`` or ``500ms``."""
    match = _INTERVAL.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not an interval: write a number of seconds, or one with a unit (30s, 5m, 1h)")
    return float(match["amount"]) * _SECONDS[match["unit"] or "s"]


class StopRequest:
    """A stop asked for by a signal: a plain flag, because a handler runs between two bytecodes
    of the main thread — maybe while it holds a lock an Event or a stream would take again."""

    def __init__(self) -> None:
        self.requested = False


class RestartProcess(BaseException):
    """Leave the command to execute it again in a fresh process (a BaseException, as SystemExit:
    it is how the command ends, not an error to report)."""

    def __init__(self, passes_done: int, reason: str) -> None:
        super().__init__(reason)
        self.passes_done = passes_done
        self.reason = reason
        self.stop: StopRequest | None = None  # the loop's, when it was under stop_on_signals


def restart_marker(passes_done: int) -> str:
    """The value of :data:`PASSES_DONE_VARIABLE` for the process that executes itself again."""
    return f"{os.getpid()}:{passes_done}"


def passes_done_before() -> int:
    """How many passes this process had run before it executed itself again (0 in a fresh start)."""
    pid, _, done = os.environ.pop(PASSES_DONE_VARIABLE, "").partition(":")
    return int(done) if pid == str(os.getpid()) and done.isdigit() else 0


def resident_mib() -> float | None:
    """This process's resident memory now (Linux; None elsewhere: no restarts there)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def run_passes(
    run_pass: Callable[[int], None],
    every: float,
    stop: StopRequest,
    *,
    passes: int | None = None,
    first: int = 1,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Call ``run_pass(first)``, ``run_pass(first + 1)``, … ``every`` seconds apart until a stop
    is requested or pass number ``passes`` ran; the number of the last pass run."""
    number = first - 1
    while not stop.requested:
        started = clock()
        number += 1
        run_pass(number)
        if passes is not None and number >= passes:
            break
        while not stop.requested and (left := started + every - clock()) > 0:
            sleep(min(left, _SLICE_SECONDS))
    return number


@contextmanager
def stop_on_signals(stop: StopRequest, announce: Callable[[str], None]) -> Iterator[None]:
    """While inside: SIGINT and SIGTERM request a stop (and ``announce`` it, which must take no
    lock the main thread may hold: write to a file descriptor); a second one raises
    :class:`KeyboardInterrupt`, as an untouched Ctrl+C would. Main thread only (Python's rule)."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.requested:
            raise KeyboardInterrupt
        stop.requested = True
        announce(f"{signal.Signals(signum).name}: stopping after this pass (again to interrupt it)")

    def hold(signum: int, frame: FrameType | None) -> None:
        stop.requested = True  # restarting: the fresh process stops instead (carry_stop_across_exec)

    previous = {sig: signal.signal(sig, handle) for sig in _STOP_SIGNALS}
    # A process that executed itself again starts with them blocked (carry_stop_across_exec): one
    # that came meanwhile is delivered now, to the handler.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    restarting = False
    try:
        yield
    except RestartProcess as restart:
        # Until execve a stop is taken down, not fatal: the process's other threads may receive it,
        # so a handler (not a mask of this thread) must stay; the default action would kill.
        restarting = True
        for sig in _STOP_SIGNALS:
            signal.signal(sig, hold)
        restart.stop = stop
        raise
    finally:
        if not restarting:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def carry_stop_across_exec(stop: StopRequest | None) -> None:
    """Just before execve: the stop signals wait, blocked, for the fresh process's handlers (the
    calling thread's mask and its pending signals outlive execve, which ends the other threads);
    a stop already asked for is made pending for it, so it stops before its first pass."""
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    if stop is not None and stop.requested:
        signal.raise_signal(signal.SIGTERM)  # this thread's: pending while blocked
