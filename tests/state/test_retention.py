"""Run-history retention: old finished runs go as a table's runs are written (and with
``sharesync db prune``), except each table's newest succeeded and newest failed run."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from support.state import FakeClock

from sharesync.state import RunStatus, StateStore, open_store
from sharesync.sync.cli.main import main

KEEP = timedelta(days=30)


def _run(store: StateStore, name: str, status: RunStatus) -> int:
    lease = store.acquire_lease(name, "worker", timedelta(seconds=60))
    run_id = store.start_run(name, lease=lease)
    store.finish_run(run_id, status, error="boom" if status is RunStatus.FAILED else None)
    store.release_lease(lease)
    return run_id


def _ids(store: StateStore, name: str) -> list[int]:
    return sorted(r.id for r in store.runs_for(name, limit=1000))


def test_closing_a_run_prunes_that_tables_old_runs_but_keeps_its_last_outcomes(
    store_url: str, clock: FakeClock
) -> None:
    store = open_store(store_url, clock=clock, run_retention=KEEP)
    old_ok = [_run(store, "s.b.t", RunStatus.SUCCEEDED) for _ in range(3)]
    old_failed = [_run(store, "s.b.t", RunStatus.FAILED) for _ in range(2)]
    other = _run(store, "s.b.other", RunStatus.SUCCEEDED)
    clock.advance(KEEP.total_seconds() - 60)
    recent = _run(store, "s.b.t", RunStatus.SUCCEEDED)
    assert _ids(store, "s.b.t") == [*old_ok, *old_failed, recent]  # nothing is old enough yet

    clock.advance(120)
    newest = _run(store, "s.b.t", RunStatus.SUCCEEDED)
    # The last failed run stays whatever its age; older succeeded ones go, as do older failed ones.
    assert _ids(store, "s.b.t") == [old_failed[-1], recent, newest]
    assert _ids(store, "s.b.other") == [other]  # another table's runs wait for that table's next run


def test_a_recorded_failed_attempt_prunes_too_and_running_runs_stay(store_url: str, clock: FakeClock) -> None:
    store = open_store(store_url, clock=clock, run_retention=KEEP)
    failures = [store.record_failed_run("s.b.t", "provider down").id for _ in range(3)]
    ok = _run(store, "s.b.t", RunStatus.SUCCEEDED)
    lease = store.acquire_lease("s.b.t", "worker", timedelta(days=90))
    running = store.start_run("s.b.t", lease=lease)
    clock.advance(KEEP.total_seconds() + 1)
    latest = store.record_failed_run("s.b.t", "provider down again").id
    assert _ids(store, "s.b.t") == [ok, running, latest]
    assert failures[-1] not in _ids(store, "s.b.t")


def test_without_retention_nothing_is_deleted(store_url: str, clock: FakeClock) -> None:
    store = open_store(store_url, clock=clock)
    ids = [_run(store, "s.b.t", RunStatus.SUCCEEDED) for _ in range(3)]
    clock.advance(10 * 365 * 86400)
    ids.append(_run(store, "s.b.t", RunStatus.SUCCEEDED))
    assert _ids(store, "s.b.t") == ids
    with pytest.raises(ValueError, match="positive retention"):
        store.prune_runs()


def test_prune_runs_covers_every_table_and_status_still_has_each_last_outcome(store_url: str, clock: FakeClock) -> None:
    store = open_store(store_url, clock=clock)
    for name in ("s.b.a", "s.b.b"):
        for _ in range(3):
            _run(store, name, RunStatus.SUCCEEDED)
            _run(store, name, RunStatus.FAILED)
    last_b = _run(store, "s.b.b", RunStatus.SUCCEEDED)
    before = store.latest_runs()
    clock.advance(KEEP.total_seconds() + 1)

    assert store.prune_runs(KEEP) == 2 * 6 + 1 - 4
    assert store.latest_runs() == before  # what status and Dagster read
    assert [r.status for r in store.runs_for("s.b.a")] == [RunStatus.FAILED, RunStatus.SUCCEEDED]
    assert [r.id for r in store.runs_for("s.b.b")][0] == last_b
    assert store.prune_runs(KEEP) == 0


def test_db_prune_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock
) -> None:
    monkeypatch.delenv("SHARESYNC_STATE_STORE", raising=False)
    url = f"sqlite:///{tmp_path}/state.db"
    store = open_store(url, clock=clock)  # runs that started on the fake clock's day, long ago
    for _ in range(3):
        _run(store, "s.b.t", RunStatus.SUCCEEDED)

    def sharesync(*args: str) -> tuple[int, str, str]:
        with pytest.raises(SystemExit) as exited:
            main(list(args))
        out, err = capsys.readouterr()
        return int(exited.value.code or 0), out, err

    code, out, _ = sharesync("db", "prune", "--url", url, "--days", "100000")
    assert code == 0 and "removed 0 runs older than 100000 days" in out
    code, out, _ = sharesync("db", "prune", "--url", url)  # the default retention: 30 days
    assert code == 0 and "removed 2 runs older than 30 days" in out
    assert len(store.runs_for("s.b.t")) == 1

    config = tmp_path / "sharesync.yaml"
    config.write_text(f"profile: p.share\nstate_store: {url}\nrun_history_days: 0\n")
    code, _, err = sharesync("--config", str(config), "db", "prune")
    assert code == 2 and err.startswith("error: run_history_days is 0") and err.count("\n") == 1


def test_a_pass_prunes_with_the_configs_retention(tmp_path: Path, clock: FakeClock) -> None:
    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.sync.core.config import parse_config

    url = f"sqlite:///{tmp_path}/state.db"
    ancient = open_store(url, clock=clock).record_failed_run("s.b.t", "long ago")
    config = parse_config({"profile": "p.share", "state_store": url, "run_history_days": 1}, base_dir=tmp_path)
    with Syncer(config) as syncer:
        latest = syncer.resources.store.record_failed_run("s.b.t", "now")  # what a pass writes for a failed table
        assert [r.id for r in syncer.resources.store.runs_for("s.b.t")] == [latest.id]
    assert ancient.id != latest.id
