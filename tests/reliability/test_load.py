"""Many tables: a pass with nothing new stays cheap, and concurrent syncs share SQLite without lock errors.

* 200 configured tables, all up to date: one ``sync`` pass asks the provider exactly one
  ``/version`` per table and nothing else, takes no lease, records no run and never starts the
  engine. (How long it takes is measured, not asserted: see docs/guarantees.md and bench/.)
* 20 ``sharesync sync <table>`` processes started at once against one SQLite state store, each
  bootstrapping its table and applying three change batches (leases, run records and checkpoint
  advances from 20 writers): all succeed, none reports a locked or busy database, and every
  target equals its source.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.reliability import Expectation, Site, assert_at_checkpoint, kill

from sharesync.pipelines.run.results import TableOutcome
from sharesync.state import Checkpoint
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.transport import build_http_client

pytestmark = pytest.mark.slow

TABLES = 200
CONCURRENT = 20


class CountingTransport(httpx.BaseTransport):
    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.endpoints: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.endpoints.append(request.url.path.rsplit("/", 1)[-1])
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _never_spark() -> object:
    raise AssertionError("the engine was started although there was nothing to do")


def _count_lease_writes(db: Path) -> None:
    """Make the database itself count every lease taken (insert, or takeover by update)."""
    with sqlite3.connect(db) as conn:
        conn.executescript(
            """
            CREATE TABLE test_lease_writes (n INTEGER);
            CREATE TRIGGER test_lease_insert AFTER INSERT ON sharesync_leases
                BEGIN INSERT INTO test_lease_writes VALUES (1); END;
            CREATE TRIGGER test_lease_update AFTER UPDATE ON sharesync_leases
                BEGIN INSERT INTO test_lease_writes VALUES (1); END;
            """
        )


def _lease_writes(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM test_lease_writes").fetchone()[0])


def test_a_pass_over_200_tables_with_nothing_new_only_asks_for_200_versions(site: Site) -> None:
    template = site.table("t000", rows=5, partitioned=False)
    for i in range(1, TABLES):
        shutil.copytree(template, site.path(f"t{i:03d}"))
    names = [f"t{i:03d}" for i in range(TABLES)]
    config = site.config(*(site.spec(t) for t in names))
    # Every table is at the provider's version already (as after a first sync of each), and its
    # checkpoint records its target as sharesync does, so the pass looks at every target.
    store = site.store()
    table_id = load_metadata_id(site, names[0])
    first_target = config.tables[0].target
    write_deltalake(first_target, pa.table({"id": [1]}))
    target = DeltaTable(first_target)
    for table in config.tables:
        if table.target != first_target:
            shutil.copytree(first_target, table.target)
        recorded = {"target_table_id": target.metadata().id, "target_version": 0, "target_mode": table.mode.value}
        checkpoint = Checkpoint(table.name, 0, table_id, "fingerprint", table.target, table.mode.value, **recorded)
        store.advance_checkpoint(checkpoint, expected_version=None)
    _count_lease_writes(site.state_db)
    assert site.server.profile_path is not None
    transport = CountingTransport()
    http = build_http_client(transport=transport)
    site.on_close(http.close)
    syncer = site.syncer(
        config, client=SharingClient(load_profile(site.server.profile_path), http=http), spark=_never_spark
    )

    started = time.monotonic()
    results = syncer.sync_all()
    seconds = time.monotonic() - started

    assert [r.outcome for r in results] == [TableOutcome.UP_TO_DATE] * TABLES
    assert all(r.error is None and r.batches == () for r in results)
    assert sorted(transport.endpoints) == ["version"] * TABLES
    assert _lease_writes(site.state_db) == 0
    assert all(store.runs_for(t.name) == [] for t in config.tables)

    # The same pass as a user runs it (interpreter start and imports included).
    started = time.monotonic()
    done = site.run_cli("sync")
    cli_seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{TABLES} tables up to date ('sharesync status' lists every table)"
    assert _lease_writes(site.state_db) == 0
    print(f"\n{TABLES}-table pass with nothing new: {seconds:.2f} s in-process, {cli_seconds:.2f} s 'sharesync sync'")


def load_metadata_id(site: Site, table: str) -> str:
    from deltalake import DeltaTable

    return str(DeltaTable(str(site.path(table))).metadata().id)


@pytest.fixture
def shared_engine() -> Iterator[str]:
    """One Sail Spark Connect server for all the sync processes (as a deployment has one Spark)."""
    from pysail.spark import SparkConnectServer

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    assert server.listening_address is not None
    try:
        yield f"sc://127.0.0.1:{server.listening_address[1]}"
    finally:
        server.stop()


def test_20_concurrent_syncs_on_one_sqlite_store_never_fail_with_a_lock_error(site: Site, shared_engine: str) -> None:
    names = [f"c{i:02d}" for i in range(CONCURRENT)]
    for seed, table in enumerate(names):
        site.table(table, rows=8, partitioned=False, seed=seed)
        site.commit(table, 3, seed=seed)
    # Bootstrap at version 0, then one change batch per version: four runs and checkpoints each.
    site.config(
        *(site.spec(t, start={"version": 0}, max_versions_per_batch=1) for t in names),
        spark={"remote": shared_engine},
    )

    processes = [site.start_cli("sync", site.name(t)) for t in names]
    outputs = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=300)
            outputs.append((process.returncode, out.decode(), err.decode()))
    finally:
        for process in processes:
            kill(process)

    for (code, out, err), table in zip(outputs, names, strict=True):
        assert code == 0, f"{table}:\n{out}\n{err}"
        text = (out + err).lower()
        assert "locked" not in text and "busy" not in text, f"{table}:\n{out}\n{err}"
    for table in names:
        assert_at_checkpoint(site, Expectation(table, "merge"))
        runs = site.store().runs_for(site.name(table))
        assert [r.status.value for r in runs] == ["succeeded"] * 4
