"""Lease contract: one holder, expiry with the store's clock, fencing tokens, heartbeat, dead-holder takeover."""

from __future__ import annotations

import dataclasses
import time
from datetime import timedelta

import pytest
from support.state import FakeClock, start_run

from sharesync.state import RunStatus, StateStore, Takeover, this_process
from sharesync.sync.core.errors import LeaseHeld

NAME = "s.b.t"
TTL = timedelta(seconds=30)


def test_acquire_then_others_are_refused_with_holder_and_expiry(clocked_store: StateStore, clock: FakeClock) -> None:
    lease = clocked_store.acquire_lease(NAME, "worker-a", TTL)
    assert (lease.owner, lease.acquired_at, lease.expires_at) == ("worker-a", clock.now, clock.now + TTL)
    assert clocked_store.get_lease(NAME) == lease
    clock.advance(10)
    with pytest.raises(LeaseHeld, match=r"by worker-a \(lease expires 2025-01-01T12:00:30Z, in 20 s\)"):
        clocked_store.acquire_lease(NAME, "worker-b", TTL)


def test_expired_lease_is_taken_over(clocked_store: StateStore, clock: FakeClock) -> None:
    old = clocked_store.acquire_lease(NAME, "worker-a", TTL)
    clock.advance(30)  # expires_at <= now: expired exactly at the boundary
    new = clocked_store.acquire_lease(NAME, "worker-b", TTL)
    assert new.owner == "worker-b" and new.token != old.token
    with pytest.raises(LeaseHeld, match="worker-b took it over"):
        clocked_store.renew_lease(old)
    assert clocked_store.release_lease(old) is False
    assert clocked_store.get_lease(NAME) == new


def test_same_owner_may_reacquire_and_gets_a_new_token(store: StateStore) -> None:
    first = store.acquire_lease(NAME, "dagster-run-42", TTL)
    second = store.acquire_lease(NAME, "dagster-run-42", TTL)
    assert second.token != first.token
    with pytest.raises(LeaseHeld):
        store.renew_lease(first)


def test_renew_extends_from_now(clocked_store: StateStore, clock: FakeClock) -> None:
    lease = clocked_store.acquire_lease(NAME, "worker-a", TTL)
    clock.advance(20)
    renewed = clocked_store.renew_lease(lease)
    assert renewed.expires_at == clock.now + TTL and renewed.acquired_at == lease.acquired_at
    assert renewed.ttl == TTL
    assert clocked_store.renew_lease(renewed, timedelta(seconds=5)).expires_at == clock.now + timedelta(seconds=5)


def test_renew_after_expiry_succeeds_while_nobody_took_over(clocked_store: StateStore, clock: FakeClock) -> None:
    lease = clocked_store.acquire_lease(NAME, "worker-a", TTL)
    clock.advance(45)
    assert clocked_store.renew_lease(lease).expires_at == clock.now + TTL


def test_release_frees_the_table(store: StateStore) -> None:
    lease = store.acquire_lease(NAME, "worker-a", TTL)
    assert store.release_lease(lease) is True
    assert store.get_lease(NAME) is None
    assert store.release_lease(lease) is False
    with pytest.raises(LeaseHeld, match="released or taken over"):
        store.renew_lease(lease)
    store.acquire_lease(NAME, "worker-b", TTL)


def test_leases_are_per_table(store: StateStore) -> None:
    one = store.acquire_lease("s.b.one", "worker-a", TTL)
    two = store.acquire_lease("s.b.two", "worker-b", TTL)
    held = {name: store.get_lease(name) for name in ("s.b.one", "s.b.two")}
    assert {name: (lease.owner, lease.token) for name, lease in held.items() if lease is not None} == {
        "s.b.one": ("worker-a", one.token),
        "s.b.two": ("worker-b", two.token),
    }
    with pytest.raises(LeaseHeld, match="worker-a"):  # each table's lease still refuses another owner
        store.acquire_lease("s.b.one", "worker-b", TTL)
    assert store.release_lease(one) and store.get_lease("s.b.one") is None
    still = store.get_lease("s.b.two")  # releasing one table's lease leaves the other's holder as it was
    assert still is not None and (still.owner, still.token) == ("worker-b", two.token)


def test_ttl_must_be_positive(store: StateStore) -> None:
    with pytest.raises(ValueError, match="positive"):
        store.acquire_lease(NAME, "worker-a", timedelta(0))


def test_hold_lease_renews_while_work_runs_and_releases(store: StateStore) -> None:
    ttl = timedelta(seconds=1)
    with store.hold_lease(NAME, ttl=ttl, renew_every=timedelta(seconds=0.1)) as keeper:
        first = keeper.lease
        deadline = time.monotonic() + 10
        while keeper.lease.expires_at <= first.expires_at:  # poll until a renewal landed
            assert time.monotonic() < deadline, "the heartbeat never renewed the lease"
            time.sleep(0.02)
        stored = store.get_lease(NAME)
        assert stored is not None and stored.token == first.token and stored.expires_at > first.expires_at
        with pytest.raises(LeaseHeld):
            store.acquire_lease(NAME, "someone-else", ttl)
        keeper.check()
    assert store.get_lease(NAME) is None


def test_keeper_reports_a_lost_lease(clocked_store: StateStore, clock: FakeClock) -> None:
    with clocked_store.hold_lease(NAME, owner="worker-a", ttl=TTL, renew_every=timedelta(seconds=0.05)) as keeper:
        clock.advance(31)
        clocked_store.acquire_lease(NAME, "worker-b", TTL)
        assert keeper.wait_lost(timeout=10)
        with pytest.raises(LeaseHeld, match="worker-b took it over"):
            keeper.check()
    lease = clocked_store.get_lease(NAME)
    assert lease is not None and lease.owner == "worker-b"  # the loser did not release it


def test_default_owner_names_host_and_pid(store: StateStore) -> None:
    import os

    with store.hold_lease(NAME) as keeper:
        assert f":{os.getpid()}:" in keeper.lease.owner


# -- holder identity: a dead holder on this host is taken over at once, others wait for the ttl --


def test_the_lease_records_the_acquiring_process(store: StateStore) -> None:
    lease = store.acquire_lease(NAME, "worker-a", TTL)
    assert lease.holder == this_process() and store.get_lease(NAME) == lease


def test_a_live_holder_on_this_host_is_not_taken_over(store: StateStore) -> None:
    store.acquire_lease(NAME, "worker-a", TTL, holder=this_process())
    with pytest.raises(LeaseHeld, match=r"by worker-a .*its process .* runs on this host"):
        store.acquire_lease_with_takeover(NAME, "worker-b", TTL)


def test_a_reused_pid_is_a_dead_holder_taken_over_at_once(clocked_store: StateStore, clock: FakeClock) -> None:
    store = clocked_store
    me = this_process()
    assert me.started is not None
    impostor = dataclasses.replace(me, started=me.started - 1)  # same pid, an earlier process
    dead = store.acquire_lease(NAME, "worker-a", TTL, holder=impostor)
    crashed = store.start_run(NAME, start_version=3, end_version=4, lease=dead)
    other_table = start_run(store, "s.b.other")

    lease, takeover = store.acquire_lease_with_takeover(NAME, "worker-b", TTL)  # no time has passed

    assert (lease.owner, lease.holder, lease.acquired_at) == ("worker-b", me, clock.now)
    assert takeover == Takeover(NAME, impostor, "worker-a", dead.expires_at, (crashed,))
    assert str(takeover) == (
        f"took over the lease of {NAME} from dead process {me.host}:{me.pid} (owner worker-a); "
        f"closed its unfinished run {crashed} as abandoned"
    )
    run = store.get_run(crashed)
    assert run is not None and run.status is RunStatus.FAILED and run.finished_at == clock.now
    assert run.error is not None and run.error.startswith("abandoned: the process holding the lease")
    assert f"({me.host}:{me.pid}, owner worker-a)" in run.error and "worker-b took the lease over" in run.error
    assert store.get_run(other_table).status is RunStatus.RUNNING  # type: ignore[union-attr]
    with pytest.raises(LeaseHeld, match="worker-b took it over"):
        store.renew_lease(dead)  # fenced: the old token acts on nothing
    with pytest.raises(LeaseHeld, match="by worker-b"):
        store.acquire_lease(NAME, "worker-c", TTL)  # the new holder lives: no second takeover


def test_a_holder_on_another_host_expires_by_its_ttl_only(clocked_store: StateStore, clock: FakeClock) -> None:
    remote = dataclasses.replace(this_process(), host="another-host", pid=4_000_000)
    clocked_store.acquire_lease(NAME, "worker-a", TTL, holder=remote)
    clock.advance(29)
    with pytest.raises(LeaseHeld, match=r"in 1 s\); wait for that sync to finish, or for the lease to expire"):
        clocked_store.acquire_lease(NAME, "worker-b", TTL)
    clock.advance(1)
    lease, takeover = clocked_store.acquire_lease_with_takeover(NAME, "worker-b", TTL)
    assert lease.owner == "worker-b" and takeover is None  # an ordinary expiry, nothing to report


def test_hold_lease_tells_the_worker_it_took_over(store: StateStore) -> None:
    me = this_process()
    assert me.started is not None
    store.acquire_lease(NAME, "worker-a", timedelta(hours=1), holder=dataclasses.replace(me, started=me.started + 7))
    with store.hold_lease(NAME, owner="worker-b") as keeper:
        assert keeper.takeover is not None and keeper.takeover.owner == "worker-a"
        assert keeper.lease.holder == me
    with store.hold_lease(NAME, owner="worker-c") as keeper:
        assert keeper.takeover is None
