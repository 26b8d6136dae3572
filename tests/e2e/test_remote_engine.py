"""A ``spark.remote`` engine: Sail in local-cluster mode really runs on its workers, and an engine
that cannot read the staging directory is a clear config error before anything downloads.

The round test (``test_rounds.py``) runs every mode against the same local-cluster server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.sail_cluster import SailServer, private_mount_prefix
from support.spark import get_spark, stop_spark
from support.spark_server import SparkCluster

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store
from sharesync.sync.core.config import SparkConfig


def test_the_spark_cluster_runs_jobs_on_two_workers(apache_spark_cluster: SparkCluster, tmp_path: Path) -> None:
    """The standalone Spark cluster behind the Connect server is real: two workers registered
    with the master, one executor on each, and a Delta write through them."""
    spark = get_spark(SparkConfig(remote=apache_spark_cluster.url))
    spark.range(0, 1000).repartition(4).write.format("delta").save(str(tmp_path / "t"))
    assert read_rows(DeltaTable(str(tmp_path / "t"))).num_rows == 1000
    assert apache_spark_cluster.registered_workers() == 2
    assert apache_spark_cluster.executors_launched() == 2


def test_the_local_cluster_runs_jobs_on_two_workers(sail_cluster: SailServer, tmp_path: Path) -> None:
    spark = get_spark(SparkConfig(remote=sail_cluster.url))
    spark.range(0, 1000).repartition(4).write.format("delta").save(str(tmp_path / "t"))
    assert read_rows(DeltaTable(str(tmp_path / "t"))).num_rows == 1000
    assert sail_cluster.workers_started() == {1, 2}


@pytest.fixture
def blind_engine(tmp_path: Path) -> Iterator[tuple[SailServer, Path]]:
    """A Sail server for which ``tmp_path/private`` is an empty directory of its own (a tmpfs in
    its mount namespace): whatever sharesync stages there, the engine cannot see."""
    hidden = tmp_path / "private"
    hidden.mkdir()
    prefix = private_mount_prefix(hidden)
    if prefix is None:
        pytest.skip("unshare cannot create a user+mount namespace here (kernel or container policy)")
    server = SailServer(workers=0, prefix=prefix)
    server.start()
    yield server, hidden
    stop_spark()  # while the server answers: closing a session on a server that is gone retries for minutes
    server.stop()


def test_an_engine_that_cannot_read_staging_is_a_config_error_before_any_download(
    workspace: Workspace, cli: Callable[..., CliResult], blind_engine: tuple[SailServer, Path]
) -> None:
    server, hidden = blind_engine
    workspace.table("m", rows=20)
    workspace.config(workspace.spec("m"), staging_dir=str(hidden / "staging"), spark={"remote": server.url})

    run = cli("--config", str(workspace.config_file), "sync")

    assert run.code == 2, run.out + run.err  # a config error
    message = " ".join(run.err.split())
    assert f"staging_dir: the Spark engine at {server.url} cannot read the probe file" in message
    assert "same files at the same path" in message and "shared storage" in message
    assert workspace.server.faults.peak_files_in_flight == 0  # nothing was downloaded
    store = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")
    assert store.get_checkpoint(workspace.name("m")) is None
    assert not list((hidden / "staging").glob(".probe-*"))  # the probe cleans up after itself
