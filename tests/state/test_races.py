"""Races between real processes: the database, not Python, decides every contest.

N spawned processes meet at a barrier and then contend; each round must have exactly one
winner and only the specific error for the others. A SIGKILLed holder's lease is taken over
at once on its own host, and after (and only after) it expires when it ran on another host. Twenty writers (4 processes x 5 threads) share one SQLite
file without "database is locked". Waiting is done by polling the store, never by sleeping
a guessed time.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from multiprocessing.context import SpawnProcess
from typing import Any

import pytest
from support import state_race_workers as workers
from support.state import make_checkpoint

from sharesync.state import RunStatus, open_store
from sharesync.sync.core.errors import LeaseHeld

pytestmark = pytest.mark.timeout(120)

CONTENDERS = 8
ROUNDS = 5
SPAWN = multiprocessing.get_context("spawn")


def _run_all(target: Callable[..., None], arg_lists: Sequence[tuple[Any, ...]], expected_messages: int) -> list[Any]:
    """Start one spawned process per argument tuple (each gets the results queue last), collect messages."""
    results: Any = SPAWN.Queue()
    processes = [SPAWN.Process(target=target, args=(*args, results), daemon=True) for args in arg_lists]
    for process in processes:
        process.start()
    messages: list[Any] = []
    try:
        deadline = time.monotonic() + 90
        while len(messages) < expected_messages:
            try:
                message = results.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                pytest.fail(f"workers went quiet after {len(messages)}/{expected_messages} messages: {messages}")
            if message[0] == "error":
                pytest.fail(f"worker {message[1]} crashed:\n{message[2]}")
            messages.append(message)
        for process in processes:
            process.join(30)
            assert process.exitcode == 0
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
                process.join()
    return messages


class Contenders:
    """A pool of CONTENDERS spawned processes sharing one barrier, reused by every race test."""

    def __init__(self, pool: Any, barrier: Any) -> None:
        self.pool, self.barrier = pool, barrier

    def race(self, worker: Callable[..., list[Any]], url: str, rounds: int) -> list[Any]:
        self.barrier.reset()
        args = [(url, "s.b.hot", f"worker-{i}", rounds) for i in range(CONTENDERS)]
        # chunksize=1 plus the barrier puts each task on its own process: a process blocked
        # at the barrier cannot pick up a second task.
        per_worker = self.pool.starmap_async(worker, args, chunksize=1).get(timeout=90)
        return [outcome for outcomes in per_worker for outcome in outcomes]


@pytest.fixture(scope="module")
def contenders() -> Iterator[Contenders]:
    barrier = SPAWN.Barrier(CONTENDERS)
    pool = SPAWN.Pool(CONTENDERS, initializer=workers.init_contender, initargs=(barrier,))
    try:
        yield Contenders(pool, barrier)
    finally:
        pool.terminate()
        pool.join()


def test_exactly_one_process_takes_the_lease_each_round(store_url: str, contenders: Contenders) -> None:
    open_store(store_url)
    messages = contenders.race(workers.lease_contender, store_url, ROUNDS)
    for round_ in range(ROUNDS):
        outcomes = Counter(kind for kind, r, _ in messages if r == round_)
        assert outcomes == {"won": 1, "held": CONTENDERS - 1}, (round_, outcomes)


def test_exactly_one_process_advances_the_checkpoint_each_round(store_url: str, contenders: Contenders) -> None:
    store = open_store(store_url)
    messages = contenders.race(workers.cas_contender, store_url, ROUNDS)
    winners = {}
    for round_ in range(ROUNDS):
        outcomes = Counter(kind for kind, r, _ in messages if r == round_)
        assert outcomes == {"won": 1, "conflict": CONTENDERS - 1}, (round_, outcomes)
        winners[round_] = next(owner for kind, r, owner in messages if r == round_ and kind == "won")
    final = store.get_checkpoint("s.b.hot")
    assert final is not None and final.version == ROUNDS - 1
    assert final.schema_fingerprint == winners[ROUNDS - 1]


def _start_doomed_holder(url: str, ttl: float, host: str | None) -> tuple[SpawnProcess, int, str]:
    """A spawned process that holds the lease of s.b.t with a heartbeat and a running run."""
    acquired = SPAWN.Event()
    results: Any = SPAWN.Queue()
    holder = SPAWN.Process(target=workers.doomed_holder, args=(url, "s.b.t", ttl, acquired, results, host), daemon=True)
    holder.start()
    if not acquired.wait(60):
        holder.kill()
        pytest.fail(f"the holder never took the lease: {results.get(timeout=1) if not results.empty() else ''}")
    kind, run_id, token = results.get(timeout=10)
    assert kind == "holding"
    return holder, run_id, token


def test_a_killed_holder_on_this_host_is_taken_over_at_once(store_url: str) -> None:
    store = open_store(store_url)
    holder, abandoned_run, token = _start_doomed_holder(store_url, ttl=60, host=None)
    assert holder.pid is not None
    try:
        with pytest.raises(LeaseHeld, match="doomed-holder .* runs on this host"):
            store.acquire_lease("s.b.t", "successor", timedelta(seconds=30))  # alive: never taken over
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(10)
        assert holder.exitcode == -signal.SIGKILL
    finally:
        if holder.is_alive():
            holder.kill()
    last = store.get_lease("s.b.t")
    assert last is not None and last.token == token and last.holder is not None and last.holder.pid == holder.pid

    lease, takeover = store.acquire_lease_with_takeover("s.b.t", "successor", timedelta(seconds=30))  # no waiting

    assert lease.owner == "successor" and lease.acquired_at < last.expires_at
    assert takeover is not None and (takeover.holder, takeover.owner) == (last.holder, "doomed-holder")
    assert takeover.abandoned_runs == (abandoned_run,)
    assert f"from dead process {last.holder.host}:{holder.pid}" in str(takeover)
    dead = store.get_run(abandoned_run)
    assert dead is not None and dead.status is RunStatus.FAILED and dead.finished_at is not None
    assert (dead.error or "").startswith(f"abandoned: the process holding the lease ({last.holder.host}:{holder.pid},")
    store.advance_checkpoint(make_checkpoint("s.b.t", 0), expected_version=None, lease=lease)  # work resumes


def test_a_killed_holders_lease_on_another_host_is_taken_over_after_expiry(store_url: str) -> None:
    ttl = 1.5
    store = open_store(store_url)
    holder, abandoned_run, token = _start_doomed_holder(store_url, ttl, host="another-host")
    try:
        # The heartbeat keeps it alive beyond its first ttl: wait (polling) for a renewal.
        first = store.get_lease("s.b.t")
        assert first is not None and first.token == token
        deadline = time.monotonic() + 30
        while (current := store.get_lease("s.b.t")) is not None and current.expires_at <= first.expires_at:
            assert time.monotonic() < deadline, "the holder's heartbeat never renewed"
            time.sleep(0.05)
        with pytest.raises(LeaseHeld, match="doomed-holder"):
            store.acquire_lease("s.b.t", "successor", timedelta(seconds=30))

        os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
        holder.join(10)
        assert holder.exitcode == -signal.SIGKILL
    finally:
        if holder.is_alive():
            holder.kill()
    last = store.get_lease("s.b.t")
    assert last is not None and last.owner == "doomed-holder"

    refused = 0
    deadline = time.monotonic() + ttl + 30
    while True:  # poll the store until the dead holder's lease expires
        try:
            lease = store.acquire_lease("s.b.t", "successor", timedelta(seconds=30))
            break
        except LeaseHeld:
            refused += 1
            assert time.monotonic() < deadline, "the dead holder's lease never expired"
            time.sleep(0.05)
    assert refused >= 1, "taken over before the dead holder's lease expired"
    assert lease.acquired_at >= last.expires_at

    # Work resumes without manual cleanup: the next run closes the dead one's record.
    store.start_run("s.b.t", start_version=0, end_version=5, lease=lease)
    dead = store.get_run(abandoned_run)
    assert dead is not None and dead.status is RunStatus.FAILED and "abandoned" in (dead.error or "")


def test_twenty_parallel_writers_share_one_sqlite_file_without_locking_errors(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path}/fresh/state.db"  # not migrated yet: all writers race to migrate it too
    processes, threads, batches = 4, 5, 5
    barrier = SPAWN.Barrier(processes)
    messages = _run_all(workers.run_writers, [(url, p, threads, batches, barrier) for p in range(processes)], processes)
    assert sorted(process for _, process, _ in messages) == list(range(processes))
    store = open_store(url)
    latest = store.latest_runs()
    assert len(latest) == processes * threads
    assert all(r.status is RunStatus.SUCCEEDED and r.stats.rows_inserted == 1 for r in latest.values())
    assert all(len(store.runs_for(name, limit=100)) == batches for name in latest)
    assert {c.version for c in store.list_checkpoints()} == {batches - 1}
