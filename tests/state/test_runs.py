"""Run-history contract: counters, redacted errors, newest-first reads, abandoned runs."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from support.state import FakeClock, start_run

from sharesync.state import RunStats, RunStatus, StateStore
from sharesync.sync.core.errors import LeaseHeld, StateError
from sharesync.sync.core.redact import register_secret

STATS = RunStats(
    rows_inserted=10, rows_updated=2, rows_deleted=1, files_downloaded=3, bytes_downloaded=2**40, url_refreshes=4
)


def test_start_then_finish_records_everything(clocked_store: StateStore, clock: FakeClock) -> None:
    store = clocked_store
    started = clock.now
    run_id = start_run(store, "s.b.t", start_version=3, end_version=9)
    running = store.get_run(run_id)
    assert running is not None
    assert (running.status, running.start_version, running.end_version) == (RunStatus.RUNNING, 3, 9)
    assert running.started_at == started and running.finished_at is None and running.stats == RunStats()

    clock.advance(90)
    done = store.finish_run(run_id, RunStatus.SUCCEEDED, STATS)
    assert done == store.get_run(run_id)
    assert done.status is RunStatus.SUCCEEDED and done.stats == STATS and done.error is None
    assert done.duration is not None and done.duration.total_seconds() == 90


def test_finish_may_correct_the_end_version(store: StateStore) -> None:
    run_id = start_run(store, "s.b.t", start_version=3, end_version=9)
    assert store.finish_run(run_id, RunStatus.SUCCEEDED, end_version=5).end_version == 5


def test_a_succeeded_run_keeps_its_note_apart_from_errors(store: StateStore) -> None:
    run_id = start_run(store, "s.b.t", start_version=9, end_version=9)
    done = store.finish_run(run_id, RunStatus.SUCCEEDED, STATS, note="re-bootstrapped: history gap")
    assert (done.status, done.error, done.note) == (RunStatus.SUCCEEDED, None, "re-bootstrapped: history gap")
    assert store.latest_runs(["s.b.t"])["s.b.t"].note == "re-bootstrapped: history gap"


def test_error_text_is_redacted_and_bounded(store: StateStore) -> None:
    register_secret("tok-very-secret-123")
    error = (
        "download failed: https://bucket.s3/part-0.parquet?X-Amz-Signature=abcdef "
        "db postgresql://admin:hunter2pw@db:5432/x bearer tok-very-secret-123 " + " ".join(map(str, range(5_000)))
    )
    run_id = start_run(store, "s.b.t")
    record = store.finish_run(run_id, RunStatus.FAILED, error=error)
    assert record.error is not None
    for secret in ("abcdef", "hunter2pw", "tok-very-secret-123"):
        assert secret not in record.error
    assert len(record.error) <= 8_000 and record.error.endswith("[truncated]")


def test_finishing_twice_or_unknown_run_is_an_error(store: StateStore) -> None:
    run_id = start_run(store, "s.b.t")
    store.finish_run(run_id, RunStatus.FAILED, error="boom")
    with pytest.raises(StateError, match="already finished as failed"):
        store.finish_run(run_id, RunStatus.SUCCEEDED)
    with pytest.raises(StateError, match="no run with id"):
        store.finish_run(run_id + 1000, RunStatus.SUCCEEDED)
    with pytest.raises(ValueError, match="final status"):
        store.finish_run(run_id, RunStatus.RUNNING)


def test_a_new_run_marks_the_dead_running_one_abandoned(store: StateStore) -> None:
    crashed = start_run(store, "s.b.t", start_version=1, end_version=2)
    other_table = start_run(store, "s.b.other")
    start_run(store, "s.b.t", start_version=1, end_version=2)
    record = store.get_run(crashed)
    assert record is not None and record.status is RunStatus.FAILED
    assert record.error is not None and "abandoned" in record.error and record.finished_at is not None
    assert store.get_run(other_table).status is RunStatus.RUNNING  # type: ignore[union-attr]


def test_a_holder_that_lost_its_lease_cannot_close_the_new_holders_run(
    clocked_store: StateStore, clock: FakeClock
) -> None:
    """A holder frozen past its lease's expiry wakes up and starts its next batch: refused, and
    the run of the sync that took the lease over meanwhile stays running."""
    store = clocked_store
    stale = store.acquire_lease("s.b.t", "worker-a", timedelta(seconds=30))
    clock.advance(31)
    current = store.acquire_lease("s.b.t", "worker-b", timedelta(seconds=30))
    live = store.start_run("s.b.t", start_version=4, end_version=5, lease=current)

    with pytest.raises(LeaseHeld):
        store.start_run("s.b.t", start_version=4, end_version=5, lease=stale)

    assert [(r.id, r.status) for r in store.runs_for("s.b.t")] == [(live, RunStatus.RUNNING)]
    clock.advance(31)  # and an expired lease of its own holder starts nothing either
    with pytest.raises(LeaseHeld, match="expired"):
        store.start_run("s.b.t", lease=current)


def test_runs_for_is_newest_first_and_limited(store: StateStore) -> None:
    ids = []
    for _ in range(5):
        run_id = start_run(store, "s.b.t")
        store.finish_run(run_id, RunStatus.SUCCEEDED)
        ids.append(run_id)
    start_run(store, "s.b.other")
    assert [r.id for r in store.runs_for("s.b.t", limit=3)] == ids[::-1][:3]
    assert store.runs_for("s.b.none") == []


def test_latest_runs_gives_one_per_table(store: StateStore) -> None:
    first = start_run(store, "s.b.a")
    store.finish_run(first, RunStatus.FAILED, error="x")
    newest_a = start_run(store, "s.b.a")
    newest_b = start_run(store, "s.b.b")
    latest = store.latest_runs()
    assert {name: r.id for name, r in latest.items()} == {"s.b.a": newest_a, "s.b.b": newest_b}
    assert set(store.latest_runs(["s.b.b", "s.b.unknown"])) == {"s.b.b"}
    assert store.latest_runs([]) == {}


def test_stats_add_up_and_refuse_negatives() -> None:
    assert STATS + STATS == RunStats(20, 4, 2, 6, 2**41, 8)
    with pytest.raises(ValueError, match="rows_deleted"):
        RunStats(rows_deleted=-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        STATS.rows_inserted = 1  # type: ignore[misc]


def test_a_failed_attempt_without_a_run_is_recorded_and_leaves_other_runs_alone(
    clocked_store: StateStore, clock: FakeClock
) -> None:
    store = clocked_store
    running = start_run(store, "s.b.t", start_version=1, end_version=2)  # someone else's run, lease held
    clock.advance(5)
    failed = store.record_failed_run("s.b.t", "s.b.t is being synced by worker-a (postgresql://u:hunter2pw@db/x)")
    assert failed == store.get_run(failed.id) == store.latest_runs(["s.b.t"])["s.b.t"]
    assert (failed.status, failed.start_version, failed.end_version) == (RunStatus.FAILED, None, None)
    assert failed.started_at == failed.finished_at == clock.now and failed.stats == RunStats()
    assert failed.error is not None and "worker-a" in failed.error and "hunter2pw" not in failed.error
    assert store.get_run(running).status is RunStatus.RUNNING  # type: ignore[union-attr]

    known = store.record_failed_run("s.b.t", "metadata call failed", start_version=3, end_version=7, stats=STATS)
    assert (known.start_version, known.end_version, known.stats) == (3, 7, STATS)
