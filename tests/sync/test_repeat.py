"""``sharesync sync --every``'s schedule and signals, without a network (``sync/cli/repeat.py``)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from sharesync.sync.cli.repeat import (
    PASSES_DONE_VARIABLE,
    parse_interval,
    passes_done_before,
    resident_mib,
    run_passes,
    stop_on_signals,
)


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), ("30s", 30.0), ("1.5m", 90.0), ("1h", 3600.0), ("500ms", 0.5), (" 0 ", 0.0)]
)
def test_intervals_are_read_with_or_without_a_unit(text: str, seconds: float) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "-1s", "1 h", "s", "1e3"])
def test_an_interval_that_is_not_one_names_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"not an interval: .*\(30s, 5m, 1h\)"):
        parse_interval(text)


class FakeClock:
    """A clock that moves only when a pass takes time or the loop waits (``Event.wait`` is faked)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now


class WaitingEvent(threading.Event):
    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.clock.waits.append(timeout)
        self.clock.now += timeout
        return self.is_set()


def test_passes_start_every_interval_and_at_once_after_a_long_one() -> None:
    clock = FakeClock()
    stop = WaitingEvent(clock)
    took = {1: 2.0, 2: 15.0, 3: 0.5}
    starts: list[float] = []

    def one_pass(number: int) -> None:
        starts.append(clock.now)
        clock.now += took[number]

    ran = run_passes(one_pass, 10.0, stop, passes=3, clock=clock)

    assert ran == 3
    assert starts == [100.0, 110.0, 125.0]  # start to start; the 15 s pass is followed at once
    assert clock.waits == [8.0, 0.0]  # no wait after the last pass


def test_a_stop_ends_the_loop_after_the_running_pass() -> None:
    clock = FakeClock()
    stop = WaitingEvent(clock)
    seen: list[int] = []

    def one_pass(number: int) -> None:
        seen.append(number)
        if number == 2:
            stop.set()  # as SIGTERM during pass 2 does

    assert run_passes(one_pass, 1.0, stop, clock=clock) == 2
    assert seen == [1, 2]


def test_the_first_signal_asks_for_a_stop_and_the_second_stops_at_once() -> None:
    stop = threading.Event()
    said: list[str] = []
    before = signal.getsignal(signal.SIGTERM)

    with stop_on_signals(stop, said.append):
        signal.raise_signal(signal.SIGTERM)
        assert stop.is_set()
        assert said == ["SIGTERM: stopping after this pass (again to stop now)"]
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)

    assert signal.getsignal(signal.SIGTERM) is before  # handlers given back


def test_a_restarted_process_numbers_its_passes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSES_DONE_VARIABLE, "4")
    done = passes_done_before()
    assert done == 4 and PASSES_DONE_VARIABLE not in os.environ  # read once: a child process starts afresh
    clock = FakeClock()
    seen: list[int] = []

    assert run_passes(seen.append, 1.0, WaitingEvent(clock), passes=6, first=done + 1, clock=clock) == 6
    assert seen == [5, 6]


def test_this_process_knows_its_resident_memory() -> None:
    resident = resident_mib()
    assert resident is not None and 10 < resident < 100_000
