"""End-to-end fixtures: provider tables on disk, a real sharing server, configs and engines.

* ``workspace``: a :class:`~e2e_support.Workspace` in ``tmp_path`` — ``table()`` creates a
  provider table (served at once by the running server), ``commit()`` makes random provider
  commits, ``config()`` writes ``sharesync.yaml`` and returns the validated ``SharesyncConfig``
  (targets, state store and staging all inside ``tmp_path``), ``engine()`` builds a
  ``SyncEngine`` that is closed after the test, ``counting_client()`` a client whose requests
  are recorded (for "nothing new means one ``/version`` call and no engine" assertions).
* ``cli``: runs ``sharesync`` in-process and returns exit code and output.
* ``sail_cluster`` (session): a separate Sail Spark Connect server in ``local-cluster`` mode with
  2 workers (:mod:`support.sail_cluster`); ``engine_config``: the config's ``spark`` section for
  the embedded engine (``{}``) and for that server, parametrized.
* ``s3_workspace``: the same with targets and staging in the moto S3 bucket (``support.s3``).

One Sail engine serves the whole test session (``sharesync.pipelines.jobs.session`` caches it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e import Workspace
from support.s3 import S3Store, S3Workspace
from support.sail_cluster import SailServer

from sharesync.sync.server.runner import SharingServer


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    """Stop the shared Sail engine once the e2e tests are done."""
    yield
    from sharesync.pipelines.jobs.session import stop_spark

    stop_spark()


@pytest.fixture
def workspace(tmp_path: Path, start_server: Callable[..., SharingServer]) -> Iterator[Workspace]:
    provider = tmp_path / "provider"
    provider.mkdir()
    ws = Workspace(tmp_path, start_server(provider))
    yield ws
    ws.close()


@pytest.fixture(scope="session")
def sail_cluster() -> Iterator[SailServer]:
    server = SailServer(workers=2)
    server.start()
    yield server
    from sharesync.pipelines.jobs.session import stop_spark

    stop_spark()  # while the server answers: closing a session on a server that is gone retries for minutes
    server.stop()


@pytest.fixture(params=["embedded", "local-cluster"])
def engine_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Top-level config for the engine under test: the embedded one, or a distributed Sail server."""
    if request.param == "embedded":
        return {}
    cluster: SailServer = request.getfixturevalue("sail_cluster")
    return {"spark": {"remote": cluster.url}}


@pytest.fixture
def s3_workspace(
    tmp_path: Path, start_server: Callable[..., SharingServer], s3_server: S3Store
) -> Iterator[S3Workspace]:
    provider = tmp_path / "provider"
    provider.mkdir()
    ws = S3Workspace(tmp_path, start_server(provider), s3_server)
    yield ws
    ws.close()
