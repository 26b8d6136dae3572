"""Process bodies for the race tests (spawned; they import this module by name).

On an unexpected exception a worker breaks its barrier, so siblings stop waiting instead of
hanging, and reports the traceback to the parent (queue message or pool task error).
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from datetime import timedelta
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Event
from typing import Any

from sharesync.state import RunStats, RunStatus, open_store, this_process
from sharesync.sync.core.errors import CheckpointConflict, LeaseHeld
from support.state import make_checkpoint

WAIT = 60.0


def _guarded(results: Queue[Any], barrier: Barrier | None, who: object, body: Any) -> None:
    try:
        body()
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put(("error", who, traceback.format_exc()))
        if barrier is not None:
            barrier.abort()


# The contenders run in a pool of spawned processes shared by the race tests (spawning costs
# more than the races); each gets the shared barrier once, at process start.
_barrier: Barrier | None = None


def init_contender(barrier: Barrier) -> None:
    global _barrier
    _barrier = barrier


def _contend(body: Any) -> list[tuple[str, int, str]]:
    assert _barrier is not None
    try:
        return body(_barrier)  # type: ignore[no-any-return]
    except BaseException:  # noqa: BLE001 - re-raised with the worker's traceback
        _barrier.abort()  # siblings stop waiting instead of hanging
        raise RuntimeError(traceback.format_exc()) from None


def lease_contender(url: str, name: str, owner: str, rounds: int) -> list[tuple[str, int, str]]:
    def body(barrier: Barrier) -> list[tuple[str, int, str]]:
        store = open_store(url)
        outcomes = []
        for round_ in range(rounds):
            barrier.wait(WAIT)
            try:
                lease = store.acquire_lease(name, owner, timedelta(seconds=60))
                outcomes.append(("won", round_, owner))
            except LeaseHeld:
                lease = None
                outcomes.append(("held", round_, owner))
            barrier.wait(WAIT)  # everyone has tried
            if lease is not None:
                assert store.release_lease(lease)
            barrier.wait(WAIT)  # released before the next round
        return outcomes

    return _contend(body)


def cas_contender(url: str, name: str, owner: str, rounds: int) -> list[tuple[str, int, str]]:
    """Round 0 races to create version 0; round r races to move r-1 → r."""

    def body(barrier: Barrier) -> list[tuple[str, int, str]]:
        store = open_store(url)
        outcomes = []
        for round_ in range(rounds):
            barrier.wait(WAIT)
            expected = None if round_ == 0 else round_ - 1
            try:
                store.advance_checkpoint(
                    make_checkpoint(name, round_, schema_fingerprint=owner), expected_version=expected
                )
                outcomes.append(("won", round_, owner))
            except CheckpointConflict:
                outcomes.append(("conflict", round_, owner))
            barrier.wait(WAIT)
        return outcomes

    return _contend(body)


def doomed_holder(url: str, name: str, ttl: float, acquired: Event, results: Queue[Any], host: str | None) -> None:
    """Hold the lease with a heartbeat and a running run until SIGKILLed.

    ``host``: record the holder as this process on that host (a remote holder, as far as the
    test's contender can tell); ``None``: as this process on this host.
    """

    def body() -> None:
        store = open_store(url)
        holder = None if host is None else dataclasses.replace(this_process(), host=host)
        with store.hold_lease(name, owner="doomed-holder", ttl=timedelta(seconds=ttl), holder=holder) as keeper:
            run_id = store.start_run(name, start_version=0, end_version=5, lease=keeper.lease)
            results.put(("holding", run_id, keeper.lease.token))
            acquired.set()
            while True:
                keeper.check()
                time.sleep(0.05)

    _guarded(results, None, "doomed-holder", body)


def run_writers(url: str, process: int, threads: int, batches: int, barrier: Barrier, results: Queue[Any]) -> None:
    """``threads`` parallel syncs of different tables in this process, all sharing one SQLite file.

    Processes contend through SQLite's file locks, threads through separate pooled
    connections of one engine; both must queue on BEGIN IMMEDIATE, never fail as "locked".
    """

    def body() -> None:
        barrier.wait(WAIT)
        start = threading.Barrier(threads)
        errors: list[str] = []

        def writer(index: int) -> None:
            try:
                start.wait(WAIT)
                store = open_store(url)  # every writer opens the fresh database (and races to migrate) at once
                name = f"s.b.table{index}"
                for batch in range(batches):
                    lease = store.acquire_lease(name, f"writer-{index}", timedelta(seconds=60))
                    run_id = store.start_run(name, start_version=batch, end_version=batch, lease=lease)
                    store.advance_checkpoint(
                        make_checkpoint(name, batch), expected_version=None if batch == 0 else batch - 1, lease=lease
                    )
                    store.finish_run(run_id, RunStatus.SUCCEEDED, RunStats(rows_inserted=1, files_downloaded=1))
                    assert store.release_lease(lease)
                    store.latest_runs()  # readers interleave with the writers
            except BaseException:  # noqa: BLE001 - collected and re-raised below
                errors.append(traceback.format_exc())
                start.abort()

        workers = [threading.Thread(target=writer, args=(process * threads + t,)) for t in range(threads)]
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
        if errors:
            raise RuntimeError(errors[0])
        results.put(("done", process, threads))

    _guarded(results, barrier, process, body)


def open_close_rounds(url: str, process: int, rounds: int, barrier: Barrier, results: Queue[Any]) -> None:
    """``rounds`` times, all processes at once: what one ``sharesync sync <table>`` process does to
    the store — the read-only checkpoint look, open (and migrate), lease, run, checkpoint — then
    close every connection, as a process that ends does (the last one out cleans up the WAL)."""

    def body() -> None:
        from sharesync.state.database import dispose_databases
        from sharesync.state.sqlite import read_checkpoints

        name = f"s.b.p{process}"
        for round_ in range(rounds):
            barrier.wait(WAIT)
            read_checkpoints(url)
            store = open_store(url)
            with store.hold_lease(name, ttl=timedelta(seconds=60)) as keeper:
                run_id = store.start_run(name, start_version=round_, end_version=round_, lease=keeper.lease)
                store.advance_checkpoint(
                    make_checkpoint(name, round_),
                    expected_version=None if round_ == 0 else round_ - 1,
                    lease=keeper.lease,
                )
                store.finish_run(run_id, RunStatus.SUCCEEDED)
            store.latest_runs()
            dispose_databases()
        results.put(("done", process, rounds))

    _guarded(results, barrier, process, body)
