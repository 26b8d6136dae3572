"""A ``kill -9``ed sync locks nothing: the very next ``sharesync sync`` takes its leases over and converges.

The real command (a subprocess, as a scheduler runs it) syncs a merge, an append and a snapshot
table with a two-minute lease ttl, and is SIGKILLed at 8 random moments (seeded): some time
after it started, or once a sync point is reached — a run is on record, a batch downloads, a
batch is applied — plus a bounded random delay. Right after each kill another ``sync`` must exit
0 without waiting for any lease to expire: a lease whose holder is provably dead on this host is
taken over at once (its unfinished run closed as abandoned), with a warning on the CLI and in the
run record. The time from each kill to that sync's success is printed (``-s`` shows it); at the
end every target equals the source at its checkpoint.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

import pytest
from support.reliability import Expectation, Site, assert_at_checkpoint, kill, poll

pytestmark = pytest.mark.slow

KILLS = 8
LEASE_TTL = 120  # seconds: waiting it out would fail the 'immediately' below many times over
MODES = {"m": "merge", "a": "append", "s": "snapshot"}
TAKEOVER = "took over the lease of"


def test_after_kill_9_the_next_sync_succeeds_at_once_and_converges(site: Site) -> None:
    rng = random.Random(20240613)
    for seed, table in enumerate(MODES):
        site.table(table, rows=40, seed=seed)
    site.config(
        *(site.spec(t, mode, max_versions_per_batch=1, download_concurrency=2) for t, mode in MODES.items()),
        lease_ttl_seconds=LEASE_TTL,
    )
    site.server.faults.download_delay_seconds = 0.1  # widens the download phase to something a poll can catch
    points: dict[str, Callable[[], bool]] = {
        "started": lambda: True,
        "run recorded": lambda: site.running_runs() > 0,
        "downloading": site.downloading,
        "applying": site.applying,
    }
    schedule = list(points) * (KILLS // len(points))  # each sync point twice, in a random order
    rng.shuffle(schedule)
    seconds: list[float] = []
    takeovers = landed = 0

    for round_, point in enumerate(schedule):
        if round_:  # something to do for the pass that is killed (round 0 bootstraps)
            for offset, table in enumerate(MODES):
                site.commit(table, 2, seed=100 * round_ + offset)
        alive, killed_at = _kill_at(site, point, points[point], rng.uniform(0, 0.5 if point == "started" else 0.3))
        landed += alive

        follow_up = site.run_cli("sync")
        seconds.append(time.monotonic() - killed_at)

        assert follow_up.returncode == 0, f"kill {round_} ({point}):\n{follow_up.stdout}\n{follow_up.stderr}"
        assert "is being synced by" not in follow_up.stdout + follow_up.stderr
        takeovers += TAKEOVER in follow_up.stdout
        said = "" if alive else " (it had finished: no kill)"
        print(f"kill {round_}: {point}{said}; the next sync succeeded {seconds[-1]:.1f} s after the kill")

    for table, mode in MODES.items():
        assert_at_checkpoint(site, Expectation(table, mode, bootstrap=0 if mode == "append" else None))
    notes = [r.note or "" for t in MODES for r in site.store().runs_for(site.name(t), limit=100)]
    print(
        f"kill -9 → next successful sync: median {statistics.median(seconds):.1f} s, max {max(seconds):.1f} s "
        f"(lease ttl {LEASE_TTL} s); {takeovers} of {KILLS} follow-ups took a dead process's lease over"
    )
    assert landed >= KILLS - 2, f"only {landed} of {KILLS} kills landed before the sync finished"
    assert takeovers >= 1 and any(TAKEOVER in n for n in notes), "no kill left a lease behind: the test proves nothing"
    assert max(seconds) < LEASE_TTL / 2


def _kill_at(site: Site, point: str, reached: Callable[[], bool], delay: float) -> tuple[bool, float]:
    """Start a sync and SIGKILL it ``delay`` seconds after ``reached`` holds; whether it still ran, and when."""
    process = site.start_cli("sync")
    try:
        poll(lambda: process.poll() is not None or reached(), timeout=120, what=point)
        moment = time.monotonic() + delay
        poll(lambda: process.poll() is not None or time.monotonic() >= moment, timeout=10, what="the moment")
    finally:
        alive = kill(process)
    return alive, time.monotonic()
