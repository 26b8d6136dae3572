"""The transfer-rate floor's arithmetic (:class:`~sharesync.sync.protocol.pace.RateMeter`), without a clock:
only time spent waiting for bytes counts, and a body is judged once per window."""

from __future__ import annotations

from sharesync.sync.protocol.pace import RateMeter


def test_a_drip_is_judged_at_the_end_of_its_first_window() -> None:
    meter = RateMeter(floor_rate=1024, floor_seconds=30)
    verdicts = [meter.arrived(1, 1.0) for _ in range(30)]  # one byte a second
    assert verdicts[:29] == [None] * 29
    assert verdicts[29] == 1.0


def test_a_fast_body_with_a_short_stall_passes() -> None:
    meter = RateMeter(floor_rate=1024, floor_seconds=30)
    assert meter.arrived(64 * 1024, 0.01) is None
    assert meter.arrived(1, 29.0) is None  # stalled, but the window's average is 2.2 KiB/s
    assert meter.arrived(1, 1.0) is None  # a new window starts after the judged one


def test_time_the_caller_spends_between_reads_does_not_count() -> None:
    """A consumer that takes a minute between reads is not a slow provider: only ``waited`` counts."""
    meter = RateMeter(floor_rate=1024, floor_seconds=30)
    assert all(meter.arrived(64 * 1024, 0.001) is None for _ in range(1000))


def test_a_floor_of_zero_never_abandons() -> None:
    meter = RateMeter(floor_rate=0, floor_seconds=1)
    assert all(meter.arrived(0, 10.0) is None for _ in range(10))
