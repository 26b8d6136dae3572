"""End-to-end fixtures: provider tables on disk, a real sharing server, configs and syncers.

* ``workspace``: a :class:`~e2e_support.Workspace` in ``tmp_path`` — ``table()`` creates a
  provider table (served at once by the running server), ``commit()`` makes random provider
  commits, ``config()`` writes ``sharesync.yaml`` and returns the validated ``SharesyncConfig``
  (targets, state store and staging all inside ``tmp_path``), ``syncer()`` builds a
  ``Syncer`` that is closed after the test, ``counting_client()`` a client whose requests
  are recorded (for "nothing new means one ``/version`` call and no engine" assertions).
* ``cli``: runs ``sharesync`` in-process and returns exit code and output.
* the engine: ``workspace`` configs run on the test's ``engine`` (``tests/conftest.py``): the
  embedded Sail unless the module parametrizes it (``pytestmark = on_both_engines``: Sail and
  Apache Spark + Delta; the random rounds also run on each engine's two-worker cluster).
* ``s3_workspace``: the same with targets and staging in the moto S3 bucket (``support.s3``).

One Sail engine serves the whole test session (``sharesync.pipelines.jobs.session`` caches it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.e2e import Workspace
from support.engines import SPARK
from support.faults import SharingServer
from support.s3 import S3Store, S3Workspace


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    """Stop the shared Sail engine once the e2e tests are done."""
    yield
    from support.spark import stop_spark

    stop_spark()


@pytest.fixture
def workspace(
    tmp_path: Path, start_server: Callable[..., SharingServer], engine_spark: dict[str, Any]
) -> Iterator[Workspace]:
    provider = tmp_path / "provider"
    provider.mkdir()
    ws = Workspace(tmp_path, start_server(provider), spark=engine_spark)
    yield ws
    ws.close()


@pytest.fixture(scope="session")
def apache_spark_s3(s3_server: S3Store) -> Iterator[str]:
    """Apache Spark + Delta with S3A pointed at moto's bucket: ``s3://`` served by S3A, and the
    bucket's credentials configured on the server, as a real deployment keeps them (sharesync
    sends only the per-bucket endpoint settings, through Spark Connect)."""
    from support.spark_server import SparkConnect

    bucket = f"spark.hadoop.fs.s3a.bucket.{s3_server.bucket}"
    server = SparkConnect(
        confs=[
            "spark.hadoop.fs.s3.impl=org.apache.hadoop.fs.s3a.S3AFileSystem",
            f"{bucket}.access.key={s3_server.access_key_id}",
            f"{bucket}.secret.key={s3_server.secret_access_key}",
        ]
    )
    server.start()
    yield server.url
    from support.spark import stop_spark

    stop_spark()
    server.stop()


@pytest.fixture
def s3_workspace(
    tmp_path: Path,
    start_server: Callable[..., SharingServer],
    s3_server: S3Store,
    engine: str,
    engine_spark: dict[str, Any],
    request: pytest.FixtureRequest,
) -> Iterator[S3Workspace]:
    provider = tmp_path / "provider"
    provider.mkdir()
    if engine == SPARK:  # the Spark server that holds the bucket's credentials (they live server-side)
        engine_spark = {"remote": request.getfixturevalue("apache_spark_s3")}
    ws = S3Workspace(tmp_path, start_server(provider), s3_server, spark=engine_spark)
    yield ws
    ws.close()
