"""Two hosts, one PostgreSQL store: lease times come from the database's clock, and a holder
frozen past its ttl cannot commit after the other host took over.

The "other host" is a separate process with its own host name and a Python wall clock minutes
off (``support.skewed_host``): were any lease time taken from a host's clock, a contender
running ahead would take a live lease early, or one running behind would wait minutes past the
expiry. Waits are polls of the database's clock, never sleeps.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.pg_server import drop_state_tables
from support.reliability import poll

from sharesync.state import StateStore, open_store, this_process
from sharesync.state.database import dispose_databases

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(180)]

NAME = "s.b.t"
SKEW = 300  # seconds: five minutes
TESTS = Path(__file__).resolve().parents[1]


@pytest.fixture
def pg_url(postgres_url: str) -> Iterator[str]:
    dispose_databases()
    drop_state_tables(postgres_url)
    yield postgres_url


def _host(skew: float, host: str, url: str, command: str, ttl: float) -> list[str]:
    return [sys.executable, "-m", "support.skewed_host", str(skew), host, url, NAME, command, str(ttl)]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}


def _acquire_on(host: str, skew: float, url: str, ttl: float) -> dict[str, Any]:
    done = subprocess.run(
        _host(skew, host, url, "acquire", ttl), capture_output=True, text=True, env=_env(), timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _hold_here(store: StateStore, ttl: float) -> Any:
    holder = dataclasses.replace(this_process(), host="host-a")
    return store.acquire_lease(NAME, "host-a-owner", timedelta(seconds=ttl), holder=holder)


def _until_expired(store: StateStore) -> None:
    lease = store.get_lease(NAME)
    assert lease is not None
    poll(lambda: store.now() >= lease.expires_at, timeout=60, what="the lease to expire by the database's clock")


def test_a_contender_whose_clock_runs_ahead_never_takes_a_live_lease(pg_url: str) -> None:
    store = open_store(pg_url)
    _hold_here(store, ttl=120)
    early = _acquire_on("host-b", SKEW, pg_url, ttl=60)  # its clock says the lease expired 3 minutes ago
    assert early["outcome"] == "held", early
    assert "is being synced by host-a-owner" in early["message"]


def test_a_contender_whose_clock_runs_behind_takes_over_right_after_the_ttl(pg_url: str) -> None:
    store = open_store(pg_url)
    _hold_here(store, ttl=2)
    _until_expired(store)
    late = _acquire_on("host-b", -SKEW, pg_url, ttl=60)  # its clock says 5 minutes are left
    assert late["outcome"] == "won", late
    lease = store.get_lease(NAME)
    assert lease is not None and lease.holder is not None and lease.holder.host == "host-b"
    # The new lease's times are the database's: it expires about 60 s from the database's now.
    assert timedelta(seconds=0) < lease.expires_at - store.now() <= timedelta(seconds=60)


def test_a_holder_whose_clock_runs_ahead_writes_the_databases_times(pg_url: str) -> None:
    store = open_store(pg_url)
    won = _acquire_on("host-b", SKEW, pg_url, ttl=2)
    assert won["outcome"] == "won", won
    lease = store.get_lease(NAME)
    assert lease is not None and lease.expires_at - store.now() <= timedelta(seconds=2)
    _until_expired(store)
    assert _hold_here(store, ttl=60).owner == "host-a-owner"  # no waiting out the host's 5 minutes


def test_a_holder_frozen_past_its_ttl_cannot_commit_after_another_host_took_over(pg_url: str) -> None:
    """SIGSTOP the holder (host-a, its clock 5 minutes ahead) mid-batch; host-b takes the lease
    after the ttl by the database's clock and starts its run; the woken holder's checkpoint
    advance is refused by the lease's token (LeaseHeld, not a version conflict), and its failed
    run is found already closed as abandoned (RunAlreadyFinished, which a batch takes quietly)."""
    store = open_store(pg_url)
    holder = subprocess.Popen(
        _host(SKEW, "host-a", pg_url, "hold", 2),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == "holding"
        os.kill(holder.pid, signal.SIGSTOP)
        _until_expired(store)
        lease = store.acquire_lease(
            NAME, "host-b-owner", timedelta(seconds=60), holder=dataclasses.replace(this_process(), host="host-b")
        )
        live_run = store.start_run(NAME, start_version=0, end_version=1, lease=lease)

        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        woken = json.loads(holder.stdout.readline())
        assert woken["advance"] == "LeaseHeld", woken
        assert woken["finish"] == "RunAlreadyFinished", woken
        assert store.get_checkpoint(NAME) is None  # nothing of the stale batch landed
        runs = {r.id: r for r in store.runs_for(NAME)}
        assert runs[live_run].status.value == "running"
        assert [r.error for i, r in runs.items() if i != live_run][0].startswith("abandoned")
    finally:
        os.kill(holder.pid, signal.SIGCONT) if holder.poll() is None else None
        holder.kill()
        holder.communicate(timeout=30)
