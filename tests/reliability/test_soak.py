"""Months of running, compressed: ``sync --every`` for many passes, the provider changing every few.

The real command runs at least ``SHARESYNC_SOAK_PASSES`` passes (default 150, under a minute on 2 cores;
``SHARESYNC_SOAK_PASSES=2000 SHARESYNC_SOAK_CHANGE_EVERY=10`` is the long run whose figures
docs/guarantees.md reports) over three tables, with one new version in each every
``SHARESYNC_SOAK_CHANGE_EVERY`` passes (default 5) and a run history kept for 20 seconds. After every pass (the line the command prints for it)
the test samples the process from ``/proc``: resident memory, open file descriptors, threads,
and the state database's size. It checks:

* memory: every sample stays under the ``--max-rss-mib`` bound (480 MiB by default, low enough
  to restart at least once) plus one pass's growth, and a process above the bound restarts
  itself and numbers on;
* no leak: after warm-up (10 rounds of changes), the median count of descriptors and threads in
  the last third is no more than in the first third (plus a little: a sample may catch a pass
  mid-way, with its downloads and jobs open). The embedded engine's runtime workers
  (``tokio-rt-worker``) are counted apart and only reported: Sail's runtime adds some over
  hundreds of passes with changes (33 → 88 threads in all over 2,000 passes), which is the
  engine's, not sharesync's (Python's threads, gRPC's and the others stay flat);
* the state database (file and WAL) stays under 8 MiB;
* retention: only each table's last succeeded and last failed run are older than the retention;
* staging: empty whenever every checkpoint is at its source's version, and at the end;
* convergence: every target equals its source at the end.

The figures are printed (``-s`` shows them).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.reliability import Expectation, Site, assert_at_checkpoint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]

PASSES = int(os.environ.get("SHARESYNC_SOAK_PASSES", "150"))
CHANGE_EVERY = int(os.environ.get("SHARESYNC_SOAK_CHANGE_EVERY", "5"))
WARM_UP_ROUNDS = 10  # the engine's thread pools fill over the first rounds of changes
RETENTION_SECONDS = 20.0
# Low enough that the default run restarts at least once (Sail keeps memory from pass to pass).
MAX_RSS_MIB = int(os.environ.get("SHARESYNC_SOAK_MAX_RSS_MIB", "480"))
ONE_PASS_GROWTH_MIB = 256
TABLES = {"m1": "merge", "m2": "merge", "a": "append"}
ENGINE_THREAD = "tokio-rt-worker"
PASS_LINE = re.compile(r" UTC pass (\d+):")
# The command with its one-second floor under --every lifted: months compressed into passes 50 ms
# apart. Run with -c, so a restart (the same argv, execve) lifts it again.
BACK_TO_BACK = [
    sys.executable,
    "-c",
    "import sharesync.sync.cli.repeat as r; r.MIN_INTERVAL_SECONDS = 0.0; from sharesync.sync.cli.main import run; run()",
]


@dataclass
class Sample:
    number: int
    rss_mib: float
    fds: int
    threads: int  # all but the embedded engine's runtime workers
    engine_threads: int  # the embedded engine's (Sail's tokio runtime) workers
    db_bytes: int


def _sample(pid: int, number: int, db: Path) -> Sample | None:
    """None once the process has exited (its last line may be read after that)."""
    try:
        return _read_sample(pid, number, db)
    except FileNotFoundError:
        return None


def _read_sample(pid: int, number: int, db: Path) -> Sample | None:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    if "VmRSS" not in status:
        return None
    db_bytes = sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # the thread ended meanwhile
            continue
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    if fds == 0:  # the process is tearing down after its last pass
        return None
    engine = sum(name == ENGINE_THREAD for name in names)
    return Sample(
        number,
        int(status["VmRSS"].split()[0]) / 1024,
        fds,
        len(names) - engine,
        engine,
        db_bytes,
    )


def _all_synced(site: Site) -> bool:
    """Every table's checkpoint is at its source's version (the lines read may lag the process)."""
    for table in TABLES:
        checkpoint = site.checkpoint(table)
        if checkpoint is None or checkpoint.version != site.version(table):
            return False
    return True


def test_sync_every_keeps_its_resources_bounded_over_many_passes(site: Site, tmp_path: Path) -> None:
    for seed, table in enumerate(TABLES):
        site.table(table, rows=20, partitioned=False, seed=seed)
    site.config(*(site.spec(t, mode) for t, mode in TABLES.items()), run_history_days=RETENTION_SECONDS / 86400)
    stderr_file = tmp_path / "stderr.txt"
    with stderr_file.open("wb") as stderr:
        process = subprocess.Popen(
            # More passes than needed: the test stops the loop (SIGTERM, as a supervisor does) once it
            # has read PASSES pass lines and seen the last change synced. The lines it reads lag the
            # process, so a fixed count could end the loop before it met the last change.
            [*BACK_TO_BACK, "--config", str(site.config_file), "sync", "--every", "0.05", "--passes", str(PASSES + 500)]
            + ["--max-rss-mib", str(MAX_RSS_MIB)],
            cwd=site.root,
            env=site.cli_env(PYTHONUNBUFFERED="1"),
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
        samples: list[Sample] = []
        numbers: list[int] = []
        last_change, changes, quiet_checks, stopping = 0, 0, 0, False
        try:
            assert process.stdout is not None
            for raw in process.stdout:
                match = PASS_LINE.search(raw.decode(errors="replace"))
                if match is None:
                    continue
                number = int(match[1])
                numbers.append(number)
                sample = _sample(process.pid, number, site.state_db)
                if sample is not None:
                    samples.append(sample)
                if stopping:
                    continue
                synced = number - last_change >= 3 and _all_synced(site)
                if synced:
                    # Every batch's files leave staging before its checkpoint moves, and nothing is new.
                    assert site.staged_files() == 0, f"staging holds files after pass {number}"
                    quiet_checks += 1
                if number % CHANGE_EVERY == 0 and number < PASSES - 3:
                    for seed, table in enumerate(TABLES):
                        site.commit(table, 1, seed=1000 * number + seed)
                    last_change, changes = number, changes + 1
                elif number >= PASSES and synced:
                    process.send_signal(signal.SIGTERM)  # the running pass finishes, then the loop exits 0
                    stopping = True
            process.wait(timeout=600)
        finally:
            process.kill()
            process.wait()
    err = stderr_file.read_text(errors="replace")
    assert process.returncode == 0, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert stopping, f"the last change was not synced within {PASSES + 500} passes"
    assert numbers == list(range(1, numbers[-1] + 1)) and len(numbers) >= PASSES

    restarts = err.count("restarting the process after pass")
    rss = [s.rss_mib for s in samples]
    for s in samples[:: max(1, PASSES // 60)]:
        print(
            f"pass {s.number}: {s.rss_mib:.0f} MiB, {s.fds} fds, {s.threads}+{s.engine_threads} threads, "
            f"{s.db_bytes // 1024} KiB"
        )
    assert max(rss) <= MAX_RSS_MIB + ONE_PASS_GROWTH_MIB
    assert restarts >= (max(rss[:-1]) > MAX_RSS_MIB)  # above the bound after a pass: restarted before the next
    warm = [s for s in samples if s.number > WARM_UP_ROUNDS * CHANGE_EVERY]
    first, last = warm[: len(warm) // 3], warm[-(len(warm) // 3) :]
    assert statistics.median(s.fds for s in last) <= statistics.median(s.fds for s in first) + 2
    assert statistics.median(s.threads for s in last) <= statistics.median(s.threads for s in first) + 4
    assert max(s.db_bytes for s in samples) <= 8 * 2**20

    with sqlite3.connect(site.state_db) as db:
        total = db.execute("SELECT count(*) FROM sharesync_runs").fetchone()[0]
        old = db.execute(
            "SELECT table_name, status FROM sharesync_runs WHERE started_at < datetime('now', ?)",
            (f"-{RETENTION_SECONDS + 5} seconds",),
        ).fetchall()
    assert len(old) == len(set(old)) <= 2 * len(TABLES), old  # each table's last outcome of a kind
    assert site.staged_files() == 0
    for table, mode in TABLES.items():
        assert_at_checkpoint(site, Expectation(table, mode, bootstrap=0 if mode == "append" else None))

    print(
        f"\nsoak: {PASSES} passes, {changes} rounds of changes, {restarts} restarts, {quiet_checks} staging checks; "
        f"RSS {rss[0]:.0f} → {rss[-1]:.0f} MiB (max {max(rss):.0f}, bound {MAX_RSS_MIB}); "
        f"fds {samples[0].fds} → {samples[-1].fds} (max {max(s.fds for s in samples)}); "
        f"threads {samples[0].threads} → {samples[-1].threads} (max {max(s.threads for s in samples)}); "
        f"engine workers {samples[0].engine_threads} → {samples[-1].engine_threads} "
        f"(max {max(s.engine_threads for s in samples)}); "
        f"state db {samples[0].db_bytes / 1024:.0f} → {samples[-1].db_bytes / 1024:.0f} KiB "
        f"(max {max(s.db_bytes for s in samples) / 1024:.0f}); {total} run rows at the end"
    )
