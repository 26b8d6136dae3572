"""Fixtures every test suite may use: sample provider tables and a running local sharing server.

* ``provider_root`` (session): ``ROOT/<share>/<schema>/<table>`` with the demo share
  ``demo.sales.{orders,customers}`` and ``samples.all_types.{partitioned,plain,no_cdf}``.
  Read-only: tests that change tables make their own (``sharesync.sync.server.samples``) and use ``start_server``.
* ``sharing_server``: a running :class:`~support.faults.SharingServer` (the production server with the
  test double of fault injection plugged in, ``support/faults``) over ``provider_root``
  with ``.endpoint``, ``.token``, ``.root``, ``.faults``, ``.clock`` and ``.profile_path``.
  Shared by the session; faults and clock are reset around every test.
* ``session_sharing_server`` (session): the same server without the resets, for session-scoped
  fixtures of other suites; leave its faults and clock alone.
* ``start_server(root, **options)``: start another server (own token, faults, settings);
  it is stopped when the test ends.
* ``s3_server`` (session): moto's S3 server on loopback with a bucket and credentials
  (``support.s3``), for targets and staging in object storage.
* ``engine``: which engine the test runs its jobs on — ``sail`` (the embedded default) unless a
  module or test parametrizes it (``pytest.mark.parametrize("engine", ENGINES, indirect=True)``)
  over ``spark`` (Apache Spark 4.2 + Delta 4.4, ``local[2]``), ``spark-cluster`` (a standalone
  Spark cluster of two workers) or ``sail-cluster`` (Sail in local-cluster mode).
  ``engine_spark`` is the matching ``spark:`` config section (``{}`` for the embedded engine).
  The Spark servers start once per test session (``support.spark_server``); tests on a Spark
  engine are slow-lane tests, so the fast lane stays Sail-only. A session with Spark tests fetches
  Spark + Delta first, once (``.engines/spark``), printing its progress (``fetch_apache_spark``).
"""

from __future__ import annotations

import os
import random
import re
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings
from support.cli_runner import CliResult, cli_runner
from support.engines import ENGINE_FIXTURE_NAMES, SAIL_CLUSTER, SPARK, SPARK_CLUSTER, engine_param
from support.faults import SharingServer

from sharesync.sync.server.samples import (
    apply_random_commits,
    build_demo_provider,
    create_cdf_disabled_table,
    create_sample_table,
)

if TYPE_CHECKING:
    from support.s3 import S3Store
    from support.sail_cluster import SailServer
    from support.spark_server import SparkCluster, SparkConnect

TEST_TOKEN = "sharesync-test-token"

# Property tests find wrong answers, not slow ones: on CI's two cores shared by two test workers, a
# per-example time limit (or a "generation too slow" check) measures the machine's load.
settings.register_profile("sharesync", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("sharesync")


@pytest.fixture(scope="session")
def provider_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("provider")
    build_demo_provider(root)
    rng = random.Random(42)
    samples = root / "samples" / "all_types"
    apply_random_commits(create_sample_table(samples / "partitioned", rows=25, seed=1), rng, 8)
    apply_random_commits(create_sample_table(samples / "plain", rows=20, partitioned=False, seed=2), rng, 6)
    create_cdf_disabled_table(samples / "no_cdf", seed=3)
    return root


@pytest.fixture(scope="session")
def session_sharing_server(provider_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharingServer]:
    with SharingServer(provider_root, token=TEST_TOKEN) as server:
        server.write_profile(tmp_path_factory.mktemp("profiles") / "local.share")
        yield server


@pytest.fixture
def sharing_server(session_sharing_server: SharingServer) -> Iterator[SharingServer]:
    session_sharing_server.reset()
    yield session_sharing_server
    session_sharing_server.reset()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[Callable[..., SharingServer]]:
    started: list[SharingServer] = []

    def start(root: Path, **options: Any) -> SharingServer:
        options.setdefault("token", TEST_TOKEN)
        server = SharingServer(root, **options).start()
        started.append(server)
        server.write_profile(tmp_path / f"server-{len(started)}.share")
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Store]:
    from support.s3 import s3_store  # moto: imported by the tests that use it only

    with s3_store() as store:
        yield store


@pytest.fixture(scope="session")
def open_s3_server() -> Iterator[tuple[S3Store, str]]:
    """moto with authentication off (presigned URLs work; see ``support.s3.s3_store``), and the ARN
    of a role whose STS sessions ``sharesync serve`` hands out as temporary table credentials."""
    import json

    from support.s3 import s3_store

    with s3_store(authenticate=False) as store:
        trust = {"Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}]}
        role = store.client("iam").create_role(RoleName="reader", AssumeRolePolicyDocument=json.dumps(trust))
        yield store, role["Role"]["Arn"]


# Under xdist, a group's tests run back to back on one worker (``EngineGroups`` below): its server
# stops after the last of them instead of at the session's end. Idle, the Spark cluster's six JVMs
# took most of a core of CI's two for the rest of the session.
_GROUP_STOPS = pytest.StashKey[dict[str, Callable[[], None]]]()


def _stop_with_its_group(request: pytest.FixtureRequest, group: str, stop: Callable[[], None]) -> None:
    if hasattr(request.config, "workerinput"):  # without xdist (-n 0) the group's tests are not contiguous
        request.config.stash.setdefault(_GROUP_STOPS, {})[group] = stop


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    group = engine_group(item.nodeid)
    if group is not None and nextitem is not None and engine_group(nextitem.nodeid) != group:
        if stop := item.config.stash.get(_GROUP_STOPS, {}).pop(group, None):
            stop()


def _stopping(server: SparkConnect | SparkCluster | SailServer) -> Callable[[], None]:
    def stop() -> None:
        _close_sessions()  # while the server answers: closing a session on a server that is gone retries
        server.stop()

    return stop


@pytest.fixture(scope="session")
def apache_spark(request: pytest.FixtureRequest) -> Iterator[str]:
    """A Spark Connect server of Apache Spark + Delta (``local[2]``) for the session; its URL.

    ``SHARESYNC_TEST_SPARK_URL`` names a running one instead (a developer's, to skip the start)."""
    from support.spark_server import SparkConnect

    if url := os.environ.get("SHARESYNC_TEST_SPARK_URL"):
        yield url
        return
    server = SparkConnect()
    server.start()
    _stop_with_its_group(request, SPARK, stop := _stopping(server))
    yield server.url
    stop()


@pytest.fixture(scope="session")
def apache_spark_cluster(request: pytest.FixtureRequest) -> Iterator[SparkCluster]:
    """A standalone Spark cluster (master, two workers) behind a Connect server, for the session."""
    from support.spark_server import SparkCluster

    cluster = SparkCluster(workers=2)
    cluster.start()
    _stop_with_its_group(request, SPARK_CLUSTER, stop := _stopping(cluster))
    yield cluster
    stop()


@pytest.fixture(scope="session")
def sail_cluster(request: pytest.FixtureRequest) -> Iterator[SailServer]:
    """A separate Sail Spark Connect server in ``local-cluster`` mode with 2 workers."""
    from support.sail_cluster import SailServer

    server = SailServer(workers=2)
    server.start()
    _stop_with_its_group(request, SAIL_CLUSTER, stop := _stopping(server))
    yield server
    stop()


def _close_sessions() -> None:
    from support.spark import stop_spark

    stop_spark()


@pytest.fixture
def engine(request: pytest.FixtureRequest) -> str:
    """``sail`` unless the test is parametrized over engines (see the module docstring)."""
    return engine_param(request)


@pytest.fixture
def engine_spark(engine: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The config's ``spark:`` section for ``engine``: ``{}`` (embedded Sail) or ``{"remote": url}``."""
    if engine == "sail":
        return {}
    server = request.getfixturevalue(ENGINE_FIXTURE_NAMES[engine])
    return {"remote": server if isinstance(server, str) else server.url}


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``cli("--config", path, "sync")``: run ``sharesync`` in-process; exit code and output."""
    return cli_runner(capsys)


# The fast lane (`pytest -m "not slow"`, README "Development") leaves out what starts the engine
# for whole CLI passes or spawns processes: every test under these folders and files is slow.
SLOW_PATHS = ("e2e/", "reliability/", "state/test_races.py", "state/test_cross_host_leases.py")


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl+C is delivered, however the suite was started: a runner started in the background of a
    non-interactive shell inherits SIGINT ignored, and so would every process a test starts (the
    Ctrl+C tests of the CLI, ``serve`` and ``dagster dev`` then fail). A handler, unlike an ignored
    signal, is reset to the default in a child process."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The suite runs on two workers (pytest-xdist, `-n 2` in pyproject.toml). The tests of each
# separate engine server go to one worker as a group, so each server starts once in the session,
# not once per worker; everything else is shared out test by test. xdist's own `xdist_group` mark
# cannot do it under pytest 9 (xdist 3.8 renames the node id, which pytest 9 no longer lets it
# do), so the scheduler reads the group from the node id: the engine's parameter id, or the test.
GROUPED_TESTS = {  # the tests that take an engine server by its fixture rather than by parameter
    "tests/e2e/test_remote_engine.py::test_the_spark_cluster_runs_jobs_on_two_workers": SPARK_CLUSTER,
    "tests/e2e/test_remote_engine.py::test_the_local_cluster_runs_jobs_on_two_workers": SAIL_CLUSTER,
}
# An engine id as one dash-separated part of the parameter id (the clusters' ids contain "-").
_ENGINE_ID = re.compile(rf"(?:^|-)({SPARK_CLUSTER}|{SAIL_CLUSTER}|{SPARK})(?:-|$)")


def engine_group(nodeid: str) -> str | None:
    """The engine server a test needs, from its id (``…[spark-cluster-merge]`` → spark-cluster)."""
    name, _, params = nodeid.partition("[")
    found = _ENGINE_ID.search(params.rstrip("]"))
    return found[1] if found else GROUPED_TESTS.get(name)


def needs_apache_spark(nodeids: Iterable[str]) -> bool:
    return any(engine_group(nodeid) in (SPARK, SPARK_CLUSTER) for nodeid in nodeids)


_SPARK_FETCHED = pytest.StashKey[bool]()


def fetch_apache_spark(config: pytest.Config) -> None:
    """Fetch Spark + Delta (``deploy/spark/fetch.sh``, cached in ``.engines/spark``) in the process
    that writes to the terminal, before any Spark lane starts, so that a first run shows its
    progress instead of a silent worker. A failure is printed here and raised again by each
    Spark test (``support.spark_server.spark_home``)."""
    if config.stash.get(_SPARK_FETCHED, False):
        return
    config.stash[_SPARK_FETCHED] = True
    from support.spark_server import spark_home

    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def write(line: str, **markup: bool) -> None:
        if reporter is None:
            print(line)
        else:
            reporter.write_line(line, **markup)

    with config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        write("Apache Spark + Delta for the Spark lanes: deploy/spark/fetch.sh into .engines/spark (once, then cached)")
        started = time.monotonic()
        try:
            home = spark_home(refresh=True, echo=write)
            write(f"Apache Spark + Delta ready in {time.monotonic() - started:.0f} s: {home}")
        except RuntimeError as error:
            write(str(error), red=True, bold=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: Sequence[str]) -> None:
    """In the xdist controller, before it hands out the first test."""
    if needs_apache_spark(ids):
        fetch_apache_spark(node.config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Without xdist (``-n 0``) the one process collects and runs: it fetches here. Never in a worker,
    nor for ``--collect-only``."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    if needs_apache_spark(item.nodeid for item in session.items):
        fetch_apache_spark(session.config)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class EngineGroups(LoadScopeScheduling):  # type: ignore[misc]
        """Each engine group as one unit of work; every other test on its own."""

        def _split_scope(self, nodeid: str) -> str:
            return engine_group(nodeid) or nodeid

    return EngineGroups(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_dir = Path(__file__).parent
    for item in items:
        relative = item.path.relative_to(tests_dir).as_posix()
        callspec = getattr(item, "callspec", None)
        engine = str(callspec.params.get("engine", "sail")) if callspec is not None else "sail"
        if relative.startswith(SLOW_PATHS) or engine != "sail":
            item.add_marker(pytest.mark.slow)
