"""Helpers of the reliability suite: one provider + server + recipient site, the real CLI, and checks.

``conftest.py`` puts this directory (and ``tests/e2e``, for the independent verifier
``verify.py``) on ``sys.path``; the project runs pytest with ``--import-mode=importlib``.

* :class:`Site` — provider tables under ``tmp_path/provider`` served by a running local
  sharing server; ``config()`` writes ``sharesync.yaml`` (state store, staging and targets all
  under ``tmp_path``); ``syncer()`` builds an in-process syncer; ``start_cli()`` /
  ``run_cli()`` run ``sharesync`` as a real subprocess (what a scheduler or a user runs).
* :class:`Expectation` — what an append target must hold (its bootstrap and restarts), so one
  check covers merge, append and snapshot tables: :func:`assert_at_checkpoint` (the target is
  the source at the stored checkpoint) and :func:`assert_not_behind_checkpoint` (after a crash:
  the target is the source at the checkpoint or at a later version, never at an earlier one).
* :func:`poll` — bounded polling: every wait on another process is a condition with a deadline.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml
from deltalake import DeltaTable, write_deltalake

from sharesync.pipelines.run.sync_pass import Syncer
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import Checkpoint, StateStore, open_store
from sharesync.sync.core.config import SharesyncConfig, parse_config
from sharesync.sync.server.samples import sample_rows
from sharesync.sync.staging.batch import batch_dir
from support.faults import SharingServer
from support.provider_tables import ProviderTables
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

_T = TypeVar("_T")
SHARE, SCHEMA = "rel", "s"
REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "sharesync.sync.cli.main"]


def poll(condition: Callable[[], Any], *, timeout: float, what: str, every: float = 0.02) -> Any:
    """Call ``condition`` until it returns something truthy (returned); AssertionError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


@dataclass
class Expectation:
    """What one table's target must hold, beyond "the source at the checkpoint".

    Append targets keep a change log: ``bootstrap`` is the version whose snapshot landed as
    inserts, ``above`` the checkpoint below which older log rows are kept as they were (after a
    history gap and a re-created source the log continues).
    """

    table: str
    mode: str
    keys: tuple[str, ...] = ("id",)
    bootstrap: int | None = None
    above: int | None = None


@dataclass
class Site(ProviderTables):
    """One test's provider, server and recipient, all under ``root``."""

    share, schema = SHARE, SCHEMA  # not annotated: class attributes, not dataclass fields

    root: Path
    server: SharingServer
    env: dict[str, str] = field(default_factory=dict)
    state_url: str = ""  # the state store's URL; "" is a SQLite file under root (state_db)

    def __post_init__(self) -> None:
        self.provider = self.server.root
        self.config_file = self.root / "sharesync.yaml"
        self.state_db = self.root / "state" / "state.db"
        self.state_url = self.state_url or f"sqlite:///{self.state_db}"
        self.staging = self.root / "staging"
        self._syncers: list[Syncer] = []
        self._closers: list[Callable[[], None]] = []

    # -- provider side (names, paths, tables and commits: ProviderTables)

    def append(self, table: str, n: int, seed: int, rows: int = 5) -> None:
        """``n`` plain appends of ``rows`` new keys each (no file is ever removed)."""
        rng = random.Random(seed)
        for _ in range(n):
            dt = DeltaTable(str(self.path(table)))
            ids = read_rows(dt, ["id"]).column("id").to_pylist()
            start = max(ids, default=0) + 1
            write_deltalake(str(self.path(table)), sample_rows(rng, list(range(start, start + rows))), mode="append")

    def version(self, table: str) -> int:
        return source_version(self.path(table))

    # -- recipient side

    def target(self, table: str) -> str:
        return str(self.root / "warehouse" / table)

    def spec(self, table: str, mode: str = "merge", **extra: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name(table), "target": f"warehouse/{table}", "mode": mode}
        if mode == "merge":
            entry["keys"] = ["id"]
        return {**entry, **extra}

    def raw_config(self, *tables: dict[str, Any], profile: Path | str | None = None, **top: Any) -> dict[str, Any]:
        chosen = profile if profile is not None else self.server.profile_path
        assert chosen is not None
        return {
            "profile": str(chosen),
            "state_store": self.state_url,
            "staging_dir": "staging",
            "tables": list(tables),
            **top,
        }

    def write_raw(self, raw: dict[str, Any]) -> Path:
        self.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        return self.config_file

    def config(self, *tables: dict[str, Any], **top: Any) -> SharesyncConfig:
        """Write ``sharesync.yaml`` and return it parsed as the CLI would."""
        raw = self.raw_config(*tables, **top)
        self.write_raw(raw)
        return parse_config(raw, base_dir=self.root, source=str(self.config_file))

    def syncer(self, config: SharesyncConfig, **options: Any) -> Syncer:
        syncer = Syncer(config, **options)
        self._syncers.append(syncer)
        return syncer

    def store(self) -> StateStore:
        return open_store(self.state_url)

    def checkpoint(self, table: str) -> Checkpoint | None:
        if self.state_url.startswith("sqlite") and not self.state_db.exists():
            return None
        return self.store().get_checkpoint(self.name(table))

    def on_close(self, closer: Callable[[], None]) -> None:
        self._closers.append(closer)

    def close(self) -> None:
        for syncer in self._syncers:
            syncer.close()
        for closer in self._closers:
            closer()

    # -- the real command, as a subprocess

    def cli_env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHARESYNC_")}
        return {**env, "PYTHONPATH": str(REPO), "RUST_LOG": "warn", **self.env, **extra}

    def start_cli(self, *args: str, **env: str) -> subprocess.Popen[bytes]:
        """``sharesync --config sharesync.yaml ARGS`` in its own process group (so a kill takes it all)."""
        return subprocess.Popen(
            [*CLI, "--config", str(self.config_file), *args],
            cwd=self.root,
            env=self.cli_env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def run_cli(self, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess[str]:
        process = self.start_cli(*args, **env)
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill(process)
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, out.decode(), err.decode())

    # -- what the recipient side looks like right now (read by the test while a sync runs)

    def running_runs(self) -> int:
        return _count(self.state_db, "SELECT count(*) FROM sharesync_runs WHERE status = 'running'")

    def staged_files(self) -> int:
        if not self.staging.exists():
            return 0
        return _looked_again(lambda: sum(1 for p in self.staging.rglob("*") if p.is_file()))

    def downloading(self, table: str | None = None) -> bool:
        """True while a batch's files (of ``table``, or of any) are being downloaded.

        Downloads land in ``<staging>/<table dir>/<batch>/raw`` (:func:`sharesync.sync.staging.batch.batch_dir`),
        a directory that exists from the start of the batch's downloads until all are staged.
        """
        if not self.staging.exists():
            return False
        tables = "*" if table is None else Path(batch_dir(self.staging, self.name(table), "x").path).parent.name
        return _looked_again(lambda: any(self.staging.glob(f"{tables}/*/raw")))

    def applying(self) -> bool:
        """True while a batch is staged and its downloads are done: the Spark job applies it (or,
        an instant later, its checkpoint moves). ``<batch>/data`` holds files, ``<batch>/raw`` is gone."""
        if not self.staging.exists():
            return False
        return _looked_again(
            lambda: any(not (d.parent / "raw").exists() and any(d.iterdir()) for d in self.staging.glob("*/*/data"))
        )

    def target_commits(self, table: str) -> int:
        log = Path(self.target(table)) / "_delta_log"
        return sum(1 for _ in log.glob("*.json")) if log.is_dir() else 0


def _looked_again(look: Callable[[], _T]) -> _T:
    """``look`` at the staging directory, again when a directory went away between being listed and
    being read (the sync removes a finished batch's while the test looks; Python 3.11's glob raises)."""
    while True:
        try:
            return look()
        except FileNotFoundError:
            continue


def kill(process: subprocess.Popen[bytes]) -> bool:
    """SIGKILL the process group of a ``start_cli`` process and reap it; False if it had exited already."""
    alive = process.poll() is None
    if alive:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if process.stdout is not None and not process.stdout.closed:
        process.communicate()
    return alive


def _count(db: Path, sql: str) -> int:
    if not db.exists():
        return 0
    with _ro(db) as conn:
        try:
            return int(conn.execute(sql).fetchone()[0])
        except sqlite3.OperationalError:  # the schema is not created yet
            return 0


@contextmanager
def _ro(db: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def state_write_lock(db: Path) -> Iterator[sqlite3.Connection]:
    """Hold the state database's write lock (``BEGIN IMMEDIATE``) until the block ends.

    A sync that reaches its next state write (checkpoint advance, run record, lease renewal)
    waits on SQLite's busy handler meanwhile — the test's way of holding a sync still between
    two steps without any hook in the product.
    """
    conn = sqlite3.connect(db, timeout=30, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield conn
        conn.execute("ROLLBACK")
    finally:
        conn.close()


def leases_expired(db: Path) -> bool:
    """True when no lease row is live (every holder released it, or its expiry has passed)."""
    if not db.exists():
        return True
    with _ro(db) as conn:
        try:
            rows = conn.execute("SELECT expires_at FROM sharesync_leases").fetchall()
        except sqlite3.OperationalError:
            return True
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return all(_parse_stored_time(value) <= now for (value,) in rows)


def _parse_stored_time(value: Any) -> Any:
    from datetime import UTC, datetime

    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ---------------------------------------------------------------- checks


def assert_target_is_source_at(site: Site, expect: Expectation, version: int) -> None:
    """The target equals the source at ``version`` (merge, snapshot) / holds its change log up to it (append)."""
    source, target = site.path(expect.table), site.target(expect.table)
    if expect.mode == "merge":
        assert_merge_target_matches(source, target, list(expect.keys), version)
    elif expect.mode == "snapshot":
        assert_snapshot_target_matches(source, target, version)
    elif expect.mode == "append":
        assert expect.bootstrap is not None, "an append expectation needs its bootstrap version"
        assert_append_target_matches(
            source, target, bootstrap_version=expect.bootstrap, end_version=version, above=expect.above
        )
    else:  # pragma: no cover - a typo in a test
        raise AssertionError(expect.mode)


def assert_at_checkpoint(site: Site, expect: Expectation, *, latest: bool = True) -> int:
    """The stored checkpoint exists (at the source's latest version unless ``latest=False``) and
    the target equals the source at it; returns the checkpoint version."""
    checkpoint = site.checkpoint(expect.table)
    assert checkpoint is not None, f"{expect.table}: no checkpoint"
    if latest:
        assert checkpoint.version == site.version(expect.table), (
            f"{expect.table}: checkpoint {checkpoint.version} != source version {site.version(expect.table)}"
        )
    assert_target_is_source_at(site, expect, checkpoint.version)
    return checkpoint.version


def assert_not_behind_checkpoint(site: Site, expect: Expectation) -> None:
    """After a crash: the target is the source at the checkpoint or at a later version.

    "Checkpoint never ahead of the target": a crash between the target commit and the
    checkpoint update leaves the target ahead (the next run re-applies that batch, which
    changes nothing); the reverse — a checkpoint claiming versions the target lacks — would
    lose those changes for good.
    """
    checkpoint = site.checkpoint(expect.table)
    if checkpoint is None:
        return  # nothing is claimed yet
    failures = []
    for version in range(checkpoint.version, site.version(expect.table) + 1):
        try:
            assert_target_is_source_at(site, expect, version)
            return
        except AssertionError as exc:
            failures.append(f"  v{version}: {str(exc).splitlines()[0]}")
    raise AssertionError(
        f"{expect.table}: the target is at no version between the checkpoint {checkpoint.version} and the "
        f"source's latest:\n" + "\n".join(failures)
    )


def delta_version(path: str) -> int | None:
    """The Delta version of the table at ``path`` (None: no table there)."""
    if not (Path(path) / "_delta_log").is_dir():
        return None
    return DeltaTable(path).version()
