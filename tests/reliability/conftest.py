"""Fixtures of the reliability suite: a fresh provider, server and recipient per test.

* ``site``: a :class:`reliability_support.Site` in ``tmp_path`` with its own running sharing
  server (own faults and clock, so a test may break it at will).
* ``cli``: run ``sharesync`` in-process (exit code, stdout, stderr) for the bad-input cases,
  where a subprocess per case would only add start-up time.

One Sail engine serves the in-process engines of the session (``sharesync.pipelines.jobs.session`` caches it);
crash tests run the real command in subprocesses, each with its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.faults import SharingServer
from support.reliability import Site


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    yield
    from support.spark import stop_spark

    stop_spark()


@pytest.fixture
def site(tmp_path: Path, start_server: Callable[..., SharingServer]) -> Iterator[Site]:
    provider = tmp_path / "provider"
    provider.mkdir()
    built = Site(tmp_path, start_server(provider))
    yield built
    built.close()

