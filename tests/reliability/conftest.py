"""Fixtures of the reliability suite: a fresh provider, server and recipient per test.

* ``site``: a :class:`reliability_support.Site` in ``tmp_path`` with its own running sharing
  server (own faults and clock, so a test may break it at will).
* ``cli``: run ``sharesync`` in-process (exit code, stdout, stderr) for the bad-input cases,
  where a subprocess per case would only add start-up time.

One Sail engine serves the in-process engines of the session (``pipelines.spark`` caches it);
crash tests run the real command in subprocesses, each with its own.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# --import-mode=importlib: the helper module here, and the independent verifier of the e2e suite.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))

from reliability_support import CliResult, Site

from sync.server.runner import SharingServer


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    yield
    from pipelines.spark import stop_spark

    stop_spark()


@pytest.fixture
def site(tmp_path: Path, start_server: Callable[..., SharingServer]) -> Iterator[Site]:
    provider = tmp_path / "provider"
    provider.mkdir()
    built = Site(tmp_path, start_server(provider))
    yield built
    built.close()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``cli("--config", path, "sync")``: run ``sharesync`` in-process; exit code and output."""
    from sync.cli.main import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
