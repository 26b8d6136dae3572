"""The pass-wide transfer budget: download slots shared by event loops in several threads, bytes in turn."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from sharesync.sync.protocol.budget import TransferBudget


class Gauge:
    """Counts holders at once, across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        with self.lock:
            self.now -= 1


def test_download_slots_bound_every_loop_together() -> None:
    budget, gauge = TransferBudget(max_downloads=3, max_bytes=1), Gauge()

    async def download() -> None:
        async with budget.download_slot():
            gauge.enter()
            await asyncio.sleep(0.005)
            gauge.leave()

    async def table() -> None:  # one table's downloader: its own loop, many files at once
        await asyncio.gather(*(download() for _ in range(12)))

    threads = [threading.Thread(target=asyncio.run, args=(table(),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert gauge.peak == 3
    assert budget.downloads_in_flight == 0


def test_a_waiter_cancelled_while_waiting_takes_no_slot() -> None:
    budget = TransferBudget(max_downloads=1, max_bytes=1)

    async def scenario() -> None:
        async with budget.download_slot():
            waiter = asyncio.create_task(budget.download_slot().__aenter__())
            await asyncio.sleep(0.01)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
        assert budget.downloads_in_flight == 0
        async with budget.download_slot():  # free again, at once
            assert budget.downloads_in_flight == 1

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_a_slot_handed_to_a_waiter_that_gave_up_is_passed_on() -> None:
    budget = TransferBudget(max_downloads=1, max_bytes=1)

    async def scenario() -> None:
        slot = budget.download_slot()
        await slot.__aenter__()
        waiter = asyncio.create_task(budget.download_slot().__aenter__())
        await asyncio.sleep(0.01)
        await slot.__aexit__(None, None, None)  # hands the slot to the waiter (its grant not run yet) …
        waiter.cancel()  # … which gives up before it runs
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await asyncio.sleep(0.01)
        assert budget.downloads_in_flight == 0

    asyncio.run(asyncio.wait_for(scenario(), 5))


def test_bytes_are_reserved_whole_and_in_turn() -> None:
    budget = TransferBudget(max_downloads=1, max_bytes=100)
    order: list[str] = []
    first_in = threading.Event()

    def hold(name: str, nbytes: int, seconds: float, signal: threading.Event | None = None) -> None:
        with budget.holding(nbytes):
            order.append(f"{name}+")
            if signal is not None:
                signal.set()
            time.sleep(seconds)
            order.append(f"{name}-")

    first = threading.Thread(target=hold, args=("a", 60, 0.1, first_in))
    first.start()
    first_in.wait(5)
    second = threading.Thread(target=hold, args=("b", 60, 0.0))  # does not fit next to a: waits
    second.start()
    time.sleep(0.02)
    third = threading.Thread(target=hold, args=("c", 10, 0.0))  # would fit, but b is first in line
    third.start()
    for thread in (first, second, third):
        thread.join(5)
    assert order[:3] == ["a+", "a-", "b+"]  # b only once a left; c, though it fit next to a, after b
    assert sorted(order[3:]) == ["b-", "c+", "c-"]
    assert budget.bytes_held == 0


def test_a_batch_larger_than_the_budget_runs_alone() -> None:
    budget = TransferBudget(max_downloads=1, max_bytes=100)
    with budget.holding(10**9):
        assert budget.bytes_held == 100
    assert budget.bytes_held == 0


def test_the_budget_needs_room() -> None:
    with pytest.raises(ValueError, match="at least one"):
        TransferBudget(max_downloads=0, max_bytes=1)


@pytest.mark.parametrize(("cpus", "tables"), [(None, 1), (1, 1), (2, 2), (8, 8), (64, 8)])
def test_a_pass_syncs_one_table_per_cpu_at_most_eight_unless_told(
    monkeypatch: pytest.MonkeyPatch, cpus: int | None, tables: int
) -> None:
    from sharesync.sync.core import limits

    monkeypatch.setattr(limits.os, "cpu_count", lambda: cpus)
    assert limits.PassLimits().parallel_tables() == tables
    assert limits.PassLimits(max_parallel_tables=12).parallel_tables() == 12


def test_a_pass_shares_the_budget_its_config_sets(tmp_path: Path) -> None:
    """``defaults.max_concurrent_downloads`` and ``max_staged_megabytes`` bound every table of a pass."""
    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.sync.core.config import parse_config

    limits = {"max_concurrent_downloads": 3, "max_staged_megabytes": 5}
    syncer = Syncer(parse_config({"profile": "p.share", "defaults": limits}, base_dir=tmp_path))
    assert (syncer.resources.budget.max_downloads, syncer.resources.budget.max_bytes) == (3, 5 * 2**20)
    assert syncer.resources.budget is syncer.resources.budget  # one for the whole pass, not one per table
