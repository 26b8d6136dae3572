"""A Dagster run killed mid-sync: the very next materialization takes its lease over and converges.

``dagster asset materialize`` (a subprocess, as a user or the daemon would launch it) syncs a
merge table version by version; it is SIGKILLed (with its process group) once the checkpoint
has moved past the bootstrap but not to the end. Then:

* the killed run's lease is still there, recorded with its holder (host, pid, process start
  time): the killed process, which this host can tell is gone; the lease itself is far from
  expiring (``lease_ttl_seconds`` is long on purpose);
* an immediate second materialization, without waiting for the lease's TTL, takes the lease
  over, closes the killed run's record as abandoned, resumes from the checkpoint and converges:
  the target equals the source at its latest version.

(A holder on another host cannot be seen from here and still expires by TTL: docs/guarantees.md.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from support.reliability import REPO, Expectation, Site, assert_at_checkpoint, kill, poll

from sharesync.state.lease_holder import is_alive_on_this_host
from sharesync.sync.core.errors import LeaseHeld

pytestmark = pytest.mark.slow

LEASE_TTL = 300  # far longer than the test: any wait for expiry would show as a timeout
BIN = Path(sys.executable).parent


def _materialize(site: Site, home: Path) -> subprocess.Popen[bytes]:
    run_config = {"execution": {"config": {"in_process": {}}}}  # one process: the run is the process
    command = [
        str(BIN / "dagster"),
        "asset",
        "materialize",
        "-m",
        "sharesync.pipelines.dagster.definitions",
        "--select",
        "sharesync/rel/s/m",
        "--config-json",
        json.dumps(run_config),
    ]
    env = {**site.cli_env(), "SHARESYNC_CONFIG": str(site.config_file), "DAGSTER_HOME": str(home)}
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )


def test_a_killed_dagster_run_is_taken_over_by_the_next_one_at_once(site: Site, tmp_path: Path) -> None:
    site.table("m", rows=30, seed=1)
    site.commit("m", 4, seed=2)
    latest = site.version("m")
    site.config(site.spec("m", start={"version": 0}, max_versions_per_batch=1), lease_ttl_seconds=LEASE_TTL)
    site.server.faults.download_delay_seconds = 0.3  # a few seconds per version: time to kill it half way
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    name = site.name("m")
    store = site.store()

    def half_way() -> bool:
        checkpoint = site.checkpoint("m")
        return checkpoint is not None and 1 <= checkpoint.version < latest and site.running_runs() > 0

    run = _materialize(site, home)
    try:
        poll(lambda: run.poll() is not None or half_way(), timeout=180, what="the run to get past its bootstrap")
        if run.poll() is None:  # a live holder keeps everyone else out
            with pytest.raises(LeaseHeld, match=f"{name} is being synced by"):
                store.acquire_lease(name, "another-worker", timedelta(seconds=LEASE_TTL))
    finally:
        assert kill(run), "the run finished before it could be killed"
    killed_at = time.monotonic()
    checkpoint = store.get_checkpoint(name)
    assert checkpoint is not None and 1 <= checkpoint.version < latest
    last = store.runs_for(name, limit=1)[0]
    interrupted = last.status.value == "running"  # else it was killed between two versions

    # The dead run's lease is still held, by that process, far from its expiry ...
    lease = store.get_lease(name)
    assert lease is not None and f":{run.pid}:" in lease.owner, lease
    assert lease.holder is not None and lease.holder.pid == run.pid, lease
    assert lease.expires_at - lease.renewed_at == timedelta(seconds=LEASE_TTL)
    assert store.now() < lease.expires_at - timedelta(seconds=LEASE_TTL / 2)
    # ... but its holder is provably gone from this host, so nobody has to wait for the TTL.
    assert is_alive_on_this_host(lease.holder) is False

    resumed = _materialize(site, home)
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, (out.decode()[-3000:], err.decode()[-3000:])
    took = time.monotonic() - killed_at
    assert store.now() < lease.expires_at, "the next run waited for the dead run's lease to expire"
    print(f"kill -9 of a Dagster run -> next materialization succeeded {took:.1f} s later (lease TTL {LEASE_TTL} s)")

    assert_at_checkpoint(site, Expectation("m", "merge"))
    runs = sorted(store.runs_for(name, limit=50), key=lambda r: r.id)
    abandoned = [r for r in runs if r.error and r.error.startswith("abandoned")]
    if interrupted:  # the killed run's record is closed by the run that took the lease over
        # (It was applying the version after the checkpoint, or had just moved the checkpoint to its own.)
        assert [r.id for r in abandoned] == [last.id], runs
        assert str(lease.holder) in (abandoned[0].error or ""), abandoned
        assert last.start_version in (checkpoint.version, checkpoint.version + 1), runs
    else:
        assert abandoned == [], runs
    resumed_runs = [r for r in runs if r.id > last.id]
    # Resumed at the checkpoint: the version the killed run was applying is applied again, once.
    assert [r.start_version for r in resumed_runs] == list(range(checkpoint.version + 1, latest + 1))
    assert all(r.status.value == "succeeded" for r in resumed_runs)
    assert all(r.started_at < lease.expires_at for r in resumed_runs)  # no run waited for the TTL
    assert store.get_lease(name) is None  # released by the run that finished
