"""PostgreSQL goes away in the middle of a pass: each table fails cleanly or completes, and the
next pass after it returns converges with no manual step.

The state store is a PostgreSQL cluster of this module's own, stopped (``pg_ctl -m immediate``:
connections are cut as by a crash) at named moments of a batch, from hooks, never after a
guessed delay:

* under the lease, as the run is put on record (``start_run``);
* while the batch's files download (the first progress report);
* between the target commit and the checkpoint's compare-and-swap (``advance_checkpoint``);
* as the succeeded run is closed (``finish_run``).

The same syncer then runs the next pass once the server is back (what ``sync --every`` does:
its pool's pre-ping replaces the cut connections). The real command is checked from outside:
a store down at the start is exit 2 and one line, a store gone mid-pass exit 1 and no traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url
from support.faults import SharingServer
from support.pg_server import Cluster, own_cluster
from support.reliability import Expectation, Site, assert_at_checkpoint, assert_not_behind_checkpoint, kill, poll

from sharesync.pipelines.run.results import TableOutcome
from sharesync.state import RunStatus, StateStore, open_store
from sharesync.state.database import database_for, dispose_databases, parse_url

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

UNREACHABLE = "cannot use state store at host 127.0.0.1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, str]]:
    with own_cluster() as made:  # never a skip: a cluster that cannot start fails the tests
        yield made


@pytest.fixture
def pg_site(
    tmp_path: Path, start_server: Callable[..., SharingServer], cluster: tuple[Cluster, str]
) -> Iterator[tuple[Site, Cluster]]:
    server, admin_url = cluster
    if not server.running:
        server.start()
    name = f"outage_{tmp_path.name[-20:].replace('-', '_').lower()}"
    conninfo = make_url(admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    provider = tmp_path / "provider"
    provider.mkdir()
    site = Site(
        tmp_path, start_server(provider), state_url=make_url(admin_url).set(database=name).render_as_string(False)
    )
    yield site, server
    site.close()
    if not server.running:
        server.start()
    dispose_databases()


class OutageStore(StateStore):
    """The state store, with the database server stopped just before one named call, once armed."""

    def __init__(self, url: str, cluster: Cluster) -> None:
        open_store(url)  # creates the schema
        super().__init__(database_for(parse_url(url)))
        self.cluster, self.moment, self.fired = cluster, "", False

    def fire(self, moment: str) -> None:
        if moment == self.moment and not self.fired:
            self.fired = True
            self.cluster.stop()

    def start_run(self, name: str, **options: Any) -> int:
        self.fire("lease")
        return super().start_run(name, **options)

    def advance_checkpoint(self, *args: Any, **options: Any) -> Any:
        self.fire("commit")
        return super().advance_checkpoint(*args, **options)

    def finish_run(self, run_id: int, status: RunStatus, *args: Any, **options: Any) -> Any:
        if status is RunStatus.SUCCEEDED:
            self.fire("finish")
        return super().finish_run(run_id, status, *args, **options)


@pytest.mark.parametrize("moment", ["lease", "download", "commit", "finish"])
def test_store_gone_mid_pass_fails_cleanly_and_the_next_pass_converges(
    pg_site: tuple[Site, Cluster], moment: str
) -> None:
    site, cluster = pg_site
    site.table("t", rows=30)
    config = site.config(site.spec("t", max_versions_per_batch=10))
    store = OutageStore(site.state_url, cluster)

    def progress(label: str, files: int) -> None:
        store.fire("download")

    syncer = site.syncer(config, store=store, progress=progress)
    [first] = syncer.sync_all()
    assert first.outcome is TableOutcome.SYNCED, first.error
    site.commit("t", 3, seed=7)
    store.moment = moment

    [failed] = syncer.sync_all()
    assert store.fired, f"the pass never reached {moment}"
    assert failed.outcome is TableOutcome.FAILED
    assert failed.transient, failed.error
    assert failed.error is not None and UNREACHABLE in failed.error
    assert site.staged_files() == 0

    cluster.start()
    expect = Expectation("t", "merge")
    assert_not_behind_checkpoint(site, expect)  # never a checkpoint ahead of its target
    [again] = syncer.sync_all()  # the same syncer and pool: no manual step
    assert again.outcome in (TableOutcome.SYNCED, TableOutcome.UP_TO_DATE), again.error
    assert assert_at_checkpoint(site, expect) == site.version("t")
    # A run the outage kept from being closed stays 'running' until the table's next run closes it.
    site.commit("t", 1, seed=8)
    [later] = syncer.sync_all()
    assert later.outcome is TableOutcome.SYNCED, later.error
    assert assert_at_checkpoint(site, expect) == site.version("t")
    runs = site.store().runs_for(site.name("t"), limit=10)
    assert runs[0].status is RunStatus.SUCCEEDED and all(r.status is not RunStatus.RUNNING for r in runs)


def test_the_command_says_in_one_line_that_the_store_is_unreachable(pg_site: tuple[Site, Cluster]) -> None:
    """Down at the start: exit 2. Gone during a batch's download: exit 1, the table's error, no traceback."""
    site, cluster = pg_site
    site.table("t", rows=30)
    site.config(site.spec("t", max_versions_per_batch=10, download_concurrency=1))
    assert site.run_cli("sync").returncode == 0
    site.commit("t", 3, seed=11)

    cluster.stop()
    at_start = site.run_cli("sync")
    assert at_start.returncode == 2, at_start.stderr
    assert at_start.stderr.count("\n") == 1 and at_start.stderr.startswith("error: ")
    assert UNREACHABLE in at_start.stderr

    cluster.start()
    site.server.faults.download_delay_seconds = 0.3  # a download phase long enough to be seen
    process = site.start_cli("sync")
    try:
        poll(lambda: process.poll() is not None or site.downloading("t"), timeout=120, what="the download")
        cluster.stop()
        out, err = process.communicate(timeout=180)
    finally:
        kill(process)
    stdout, stderr = out.decode(), err.decode()
    assert process.returncode == 1, stdout + stderr
    assert "Traceback" not in stderr, stderr
    assert UNREACHABLE in stdout + stderr
    assert site.staged_files() == 0

    cluster.start()
    site.server.faults.download_delay_seconds = 0
    after = site.run_cli("sync")
    assert after.returncode == 0, after.stdout + after.stderr
    assert_at_checkpoint(site, Expectation("t", "merge"))
