"""``sharesync sync --every``'s schedule and signals, without a network (``sync/cli/repeat.py``)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.monotonic import FakeClock

from sharesync.sync.cli.repeat import (
    PASSES_DONE_VARIABLE,
    RestartProcess,
    StopRequest,
    carry_stop_across_exec,
    parse_interval,
    passes_done_before,
    resident_mib,
    restart_marker,
    run_passes,
    stop_on_signals,
)
from sharesync.sync.cli.restart import restart_if_due
from sharesync.sync.core.config import SharesyncConfig, parse_config


@pytest.mark.parametrize(
    ("text", "seconds"), [("30", 30.0), ("30s", 30.0), ("1.5m", 90.0), ("1h", 3600.0), ("500ms", 0.5), (" 0 ", 0.0)]
)
def test_intervals_are_read_with_or_without_a_unit(text: str, seconds: float) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "-1s", "1 h", "s", "1e3"])
def test_an_interval_that_is_not_one_names_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"not an interval: .*\(30s, 5m, 1h\)"):
        parse_interval(text)


def test_passes_start_every_interval_and_at_once_after_a_long_one() -> None:
    clock = FakeClock()
    began = clock.now
    took = {1: 2.0, 2: 15.0, 3: 0.5}
    starts: list[float] = []

    def one_pass(number: int) -> None:
        starts.append(clock.now)
        clock.now += took[number]

    ran = run_passes(one_pass, 10.0, StopRequest(), passes=3, clock=clock, sleep=clock.sleep)
    assert ran == 3
    assert starts == [began, began + 10.0, began + 25.0]  # start to start; the 15 s pass is followed at once
    assert sum(clock.sleeps) == pytest.approx(8.0)  # after pass 1 only; never after the last

    clock = FakeClock()
    run_passes(lambda number: None, 0.5, StopRequest(), passes=2, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == [pytest.approx(0.2), pytest.approx(0.2), pytest.approx(0.1)]  # slices, none after the last


def test_a_stop_ends_the_wait_within_a_slice_and_the_loop_after_the_running_pass() -> None:
    clock = FakeClock()
    stop = StopRequest()
    seen: list[int] = []

    def one_pass(number: int) -> None:
        seen.append(number)

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if len(clock.sleeps) == 3:
            stop.requested = True  # a signal during the wait for pass 2 (an hour away)

    assert run_passes(one_pass, 3600.0, stop, clock=clock, sleep=sleep) == 1
    assert seen == [1] and len(clock.sleeps) == 3

    stop = StopRequest()

    def stopping(number: int) -> None:
        seen.append(number)
        stop.requested = number == 2  # as SIGTERM during pass 2 does

    seen.clear()
    assert run_passes(stopping, 0.0, stop, clock=clock, sleep=clock.sleep) == 2
    assert seen == [1, 2]


def test_the_first_signal_asks_for_a_stop_and_the_second_interrupts() -> None:
    stop = StopRequest()
    said: list[str] = []
    before = signal.getsignal(signal.SIGTERM)

    with stop_on_signals(stop, said.append):
        signal.raise_signal(signal.SIGTERM)
        assert stop.requested
        assert said == ["SIGTERM: stopping after this pass (again to interrupt it)"]
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)

    assert signal.getsignal(signal.SIGTERM) is before  # handlers given back


@pytest.mark.parametrize("when", ["taken-just-before", "during-the-restart", "after-the-mask"])
def test_a_stop_around_a_restart_is_carried_to_the_fresh_process(when: str) -> None:
    """SIGTERM between a pass that asks for a restart and the fresh process's handlers neither kills
    the process (exit -15 for a supervisor's plain stop: the default action, in any thread) nor is
    lost: a handler takes it down until :func:`carry_stop_across_exec`, which leaves it pending and
    blocked for the fresh process (a thread's mask and pending signals outlive execve)."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    first = StopRequest()
    try:
        with pytest.raises(RestartProcess) as restart, stop_on_signals(first, lambda _: None):
            if when == "taken-just-before":
                signal.raise_signal(signal.SIGTERM)  # handled by the loop's handler: a stop asked for
            raise RestartProcess(3, "above --max-rss-mib")
        assert restart.value.stop is first
        if when == "during-the-restart":
            signal.raise_signal(signal.SIGTERM)  # the default action would end the process here
            assert first.requested
        carry_stop_across_exec(restart.value.stop)  # what the console script does before execve
        if when == "after-the-mask":
            signal.raise_signal(signal.SIGTERM)
        assert {signal.SIGINT, signal.SIGTERM} <= signal.pthread_sigmask(signal.SIG_BLOCK, [])
        assert signal.SIGTERM in signal.sigpending()

        fresh = StopRequest()  # the process after execve, entering its loop
        with stop_on_signals(fresh, lambda _: None):
            assert fresh.requested
        assert signal.SIGTERM not in signal.sigpending()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT, signal.SIGTERM])
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_no_restart_leaves_the_stop_signals_as_they_were() -> None:
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    with stop_on_signals(StopRequest(), lambda _: None):
        pass
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert not {signal.SIGINT, signal.SIGTERM} & signal.pthread_sigmask(signal.SIG_BLOCK, [])


def test_a_restarted_process_numbers_its_passes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PASSES_DONE_VARIABLE, restart_marker(4))
    done = passes_done_before()
    assert done == 4 and PASSES_DONE_VARIABLE not in os.environ  # read once: a child process starts afresh
    clock = FakeClock()
    seen: list[int] = []

    assert run_passes(seen.append, 1.0, StopRequest(), passes=6, first=done + 1, clock=clock, sleep=clock.sleep) == 6
    assert seen == [5, 6]


@pytest.mark.parametrize("inherited", ["4", "1:4", "x:4", "{pid}:x"])
def test_a_pass_count_from_another_process_is_ignored(monkeypatch: pytest.MonkeyPatch, inherited: str) -> None:
    # The pid is filled in here, not in the test id: ids must not differ between test workers.
    monkeypatch.setenv(PASSES_DONE_VARIABLE, inherited.format(pid=os.getpid()))
    assert passes_done_before() == 0


def test_this_process_knows_its_resident_memory() -> None:
    resident = resident_mib()
    assert resident is not None and 10 < resident < 100_000


def _config(region: str) -> SharesyncConfig:
    storage = {"s3://lake/": {"region": region}}
    return parse_config({"profile": "p.share", "storage": storage}, base_dir=Path("/base"))


def test_a_process_restarts_when_the_storage_settings_changed_or_it_holds_too_much(
    capsys: pytest.CaptureFixture[str],
) -> None:
    started_with = _config("eu-west-1").storage
    restart_if_due(3, _config("eu-west-1"), started_with, 100_000, first_here=1)  # nothing to do
    restart_if_due(3, _config("eu-west-1"), started_with, 0, first_here=1)  # --max-rss-mib 0: never

    with pytest.raises(RestartProcess, match="storage settings changed") as moved:
        restart_if_due(3, _config("us-east-1"), started_with, 0, first_here=1)
    assert moved.value.passes_done == 2

    with pytest.raises(RestartProcess, match=r"MiB resident, above --max-rss-mib 1$"):
        restart_if_due(3, _config("eu-west-1"), started_with, 1, first_here=1)
    assert capsys.readouterr().err == ""
    # A process that restarted before and is above the bound after one pass: say the bound is too low.
    with pytest.raises(RestartProcess):
        restart_if_due(6, _config("eu-west-1"), started_with, 1, first_here=5)
    assert "--max-rss-mib 1 is below what one pass leaves in a fresh process" in capsys.readouterr().err
