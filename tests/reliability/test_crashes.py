"""``kill -9`` at any moment loses nothing and doubles nothing.

The real command (``sharesync sync`` in a subprocess, with its own embedded engine) syncs a
merge, an append and a snapshot table through rounds of provider commits (a bootstrap round,
then two rounds of four commits, two versions per batch) and is SIGKILLed four times per round:

* ``commit-gap:<table>`` (twice per round, each table twice in all): between a target commit
  and its checkpoint update. Once the table's downloads run, the test holds the state
  database's write lock, so the sync commits to its target and then waits at the checkpoint
  advance; it is killed as soon as the target's Delta log gains a commit (for append tables
  that may be between the DELETE of rows above the checkpoint and the append);
* ``startup`` (a seeded random moment 0.5-2.5 s after start: imports, version polls, metadata,
  change listings), ``running`` (a run is recorded: planning, queries), ``download`` (a batch's
  files are downloading) and ``merge`` (a batch is staged and its Spark job applies it): in turn
  in the other two slots of each round, at a seeded random moment within the phase.

A sync that finishes before its phase comes (a table caught in its commit gap resumes from its
target's record, so the next attempt has less to do) is followed by two more provider commits
per table and one more try. Every wait is a polled condition with a deadline. After each kill the checkpoint must never be
ahead of the target (the target is the source at the checkpoint or at a later version); once
the killed sync's 2 s lease has expired the next attempt starts. After each round a clean run
must exit 0 and leave every target equal to the source at its checkpoint (the source's latest
version), the append target holding each change row exactly once, and no staged file behind.
"""

from __future__ import annotations

import itertools
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable

import pytest
from support.reliability import (
    Expectation,
    Site,
    assert_at_checkpoint,
    assert_not_behind_checkpoint,
    kill,
    leases_expired,
    poll,
    state_write_lock,
)

pytestmark = pytest.mark.slow

ROUNDS = 3
KILLS_PER_ROUND = 4
PHASES = ("startup", "running", "download", "merge")  # besides the scheduled "commit-gap:<table>" kills
LEASE_TTL = 2  # seconds: a killed sync's tables are free again this long after its last renewal
MODES = {"m": "merge", "a": "append", "s": "snapshot"}


def test_sigkill_at_random_moments_never_loses_or_doubles_a_row(site: Site) -> None:
    rng = random.Random(20240601)
    for seed, table in enumerate(MODES):
        site.table(table, rows=40, seed=seed)
    site.config(
        *(site.spec(t, mode, max_versions_per_batch=2, download_concurrency=2) for t, mode in MODES.items()),
        lease_ttl_seconds=LEASE_TTL,
    )
    expectations = {t: Expectation(t, mode, bootstrap=0 if mode == "append" else None) for t, mode in MODES.items()}
    site.server.faults.download_delay_seconds = 0.15  # widens the download phase to something a poll can catch
    gap_tables = itertools.cycle(MODES)  # each table's commit gap is hit in turn: m, a, s, m, a, s
    phases = itertools.cycle(PHASES)  # and the other phases in turn, at a random moment within each
    hits: Counter[str] = Counter()

    for round_ in range(ROUNDS):
        if round_:
            for offset, table in enumerate(MODES):
                site.commit(table, 4, seed=100 * round_ + offset)
        # Two kills in a commit gap (tables in sync order), then two in the other phases.
        gaps = sorted((next(gap_tables), next(gap_tables)), key=list(MODES).index)
        schedule = [f"commit-gap:{t}" for t in gaps] + [next(phases), next(phases)]
        for slot, phase in enumerate(schedule):
            got = _kill_once(site, phase, rng)
            if got == "finished":
                # Nothing was left for that phase: the tables a kill caught in their commit gap
                # resume from their targets' records, so no attempt does their batches again.
                # The provider commits more, and the kill is tried once more.
                for offset, table in enumerate(MODES):
                    site.commit(table, 2, seed=1000 * round_ + 10 * slot + offset)
                got = _kill_once(site, phase, rng)
            hits[got] += 1
            poll(
                lambda: leases_expired(site.state_db), timeout=4 * LEASE_TTL, what="the killed sync's leases to expire"
            )
            for expect in expectations.values():
                assert_not_behind_checkpoint(site, expect)

        clean = site.run_cli("sync")
        assert clean.returncode == 0, f"round {round_}: the clean run failed:\n{clean.stdout}\n{clean.stderr}"
        for expect in expectations.values():
            assert_at_checkpoint(site, expect)
        _no_run_left_running(site)
        assert site.staged_files() == 0, "the clean run left staged files behind"

    # The schedule hit what it claims: every table's commit gap twice, and nearly every kill landed.
    print("kills:", dict(hits))
    assert all(hits[f"commit-gap:{t}"] == 2 for t in MODES), hits
    assert all(hits[phase] >= 1 for phase in PHASES), hits
    assert hits["finished"] + hits["before-commit"] <= 2, hits


def _kill_once(site: Site, phase: str, rng: random.Random) -> str:
    """Start a sync and kill it in ``phase``; returns the phase hit ('finished': it ended first)."""
    process = site.start_cli("sync")
    try:
        if phase.startswith("commit-gap:"):
            return _kill_in_commit_gap(site, process, phase.split(":")[1])
        entered: dict[str, Callable[[], bool]] = {
            "startup": lambda: True,
            "running": lambda: site.running_runs() > 0,
            "download": lambda: site.downloading(),
            "merge": lambda: site.applying(),
        }
        poll(lambda: process.poll() is not None or entered[phase](), timeout=60, what=f"phase {phase}")
        # A random moment within the phase (from the start of the process for 'startup').
        jitter = {"startup": (0.5, 2.5), "running": (0, 0.3), "download": (0, 0.3), "merge": (0, 0.1)}[phase]
        moment = time.monotonic() + rng.uniform(*jitter)
        poll(lambda: process.poll() is not None or time.monotonic() >= moment, timeout=10, what="the moment")
        return phase if kill(process) else "finished"
    finally:
        kill(process)


def _kill_in_commit_gap(site: Site, process: subprocess.Popen[bytes], table: str) -> str:
    # The table's files are downloading: its target commit and checkpoint update are both ahead.
    poll(lambda: process.poll() is not None or site.downloading(table), timeout=60, what=f"downloads of {table}")
    if process.poll() is not None:
        return "finished"
    # Counted before the lock is taken: taking it may wait for a state write of the sync's, during
    # which the table's target commit can land (then the sync waits at its checkpoint: the gap).
    before = site.target_commits(table)
    with state_write_lock(site.state_db):
        try:
            poll(
                lambda: process.poll() is not None or site.target_commits(table) > before,
                timeout=20,
                what=f"a commit to the target of {table}",
            )
        except AssertionError:
            kill(process)
            # An earlier kill may have caught the table after its target commit (say, a bootstrap
            # beside another table's gap): this attempt applies nothing again and waits at its
            # checkpoint, the same gap. Otherwise it waited at a state write before its commit.
            return f"commit-gap:{table}" if _target_ahead_of_checkpoint(site, table) else "before-commit"
        # It waits for the lock: after the target commit, before the checkpoint update.
        return f"commit-gap:{table}" if kill(process) else "finished"


def _target_ahead_of_checkpoint(site: Site, table: str) -> bool:
    commits = site.target_commits(table)
    checkpoint = site.checkpoint(table)
    recorded = None if checkpoint is None else checkpoint.target_version
    return commits > 0 and (recorded is None or recorded < commits - 1)


def _no_run_left_running(site: Site) -> None:
    """A run left 'running' by a killed sync is closed as abandoned when its table next runs; one
    may stay only for a table the clean run found up to date (killed after its checkpoint moved)."""
    store = site.store()
    for table in MODES:
        runs = store.runs_for(site.name(table), limit=1)
        if runs and runs[0].status.value == "running":
            checkpoint = store.get_checkpoint(site.name(table))
            assert checkpoint is not None and checkpoint.version == site.version(table), runs[0]
