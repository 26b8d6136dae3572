"""Fifty processes × five rounds on one fresh SQLite store: no lock error, ever.

CI once saw one of 20 concurrent ``sharesync sync`` processes on a fresh store fail with the
state database "locked … while reading the schema revision", having waited no time at all:
SQLite answers a connection's first query with SQLITE_BUSY without calling the busy handler
while the last other connection cleans up the WAL files as it closes, or while another runs WAL
recovery (sqlite.org/wal.html). Processes that come and go, as CLI passes do, meet those
windows; :func:`sharesync.state.database._open_wal` retries them within the busy timeout.
Each round every process opens the store, takes its table's lease, records a run, advances its
checkpoint and closes every connection.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from pathlib import Path
from typing import Any

import pytest
from support import state_race_workers as workers

from sharesync.state import RunStatus, open_store

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

PROCESSES = 50
ROUNDS = 5
SPAWN = multiprocessing.get_context("spawn")


def test_fifty_processes_open_and_write_one_fresh_sqlite_store_without_lock_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state/state.db"
    barrier = SPAWN.Barrier(PROCESSES)
    results: Any = SPAWN.Queue()
    processes = [
        SPAWN.Process(target=workers.open_close_rounds, args=(url, p, ROUNDS, barrier, results), daemon=True)
        for p in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    try:
        done, deadline = 0, time.monotonic() + 540
        while done < PROCESSES:
            try:
                message = results.get(timeout=max(deadline - time.monotonic(), 0.1))
            except queue.Empty:
                pytest.fail(f"workers went quiet after {done}/{PROCESSES} finished")
            assert message[0] == "done", f"process {message[1]} failed:\n{message[2]}"
            done += 1
        for process in processes:
            process.join(60)
            assert process.exitcode == 0
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()

    store = open_store(url)
    checkpoints = {c.name: c.version for c in store.list_checkpoints()}
    assert checkpoints == {f"s.b.p{p}": ROUNDS - 1 for p in range(PROCESSES)}
    latest = store.latest_runs()
    assert len(latest) == PROCESSES and all(r.status is RunStatus.SUCCEEDED for r in latest.values())
