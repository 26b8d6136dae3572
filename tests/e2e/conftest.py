"""End-to-end fixtures: provider tables on disk, a real sharing server, configs and engines.

* ``workspace``: a :class:`Workspace` in ``tmp_path`` — ``table()`` creates a provider table
  (served at once by the running server), ``commit()`` makes random provider commits,
  ``config()`` writes ``sharesync.yaml`` and returns the validated :class:`SharesyncConfig`
  (targets, state store and staging all inside ``tmp_path``), ``engine()`` builds a
  :class:`SyncEngine` that is closed after the test.
* ``CountingTransport`` / ``counting_client``: an httpx transport that records every request
  a client sends, for "nothing new means one ``/version`` call and no engine" assertions.

One Sail engine serves the whole test session (``pipelines.spark`` caches it).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

# --import-mode=importlib: make the sibling helper modules importable by name.
sys.path.insert(0, str(Path(__file__).parent))

from pipelines.engine import SyncEngine
from sync.config import SharesyncConfig, parse_config
from sync.samples import apply_random_commits, create_sample_table, table_path
from sync.server.runner import SharingServer

SHARE, SCHEMA = "e2e", "s"


class CountingTransport(httpx.BaseTransport):
    """Forwards to a real transport and records ``(method, path)`` of every request."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[tuple[str, str]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()

    @property
    def endpoints(self) -> list[str]:
        """The last path segment of each request: ``version``, ``metadata``, ``query``, ``changes``."""
        return [path.rsplit("/", 1)[-1] for _, path in self.requests]


class Workspace:
    """One test's provider, server, config and engines, all under ``tmp_path``."""

    def __init__(self, root: Path, server: SharingServer) -> None:
        self.root = root
        self.provider = server.root
        self.server = server
        self.config_file = root / "sharesync.yaml"
        self._engines: list[SyncEngine] = []
        self._closers: list[Callable[[], None]] = []

    # -- provider side

    def path(self, table: str) -> Path:
        return table_path(self.provider, SHARE, SCHEMA, table)

    def table(self, table: str, *, rows: int = 40, partitioned: bool = True, cdf: bool = True, seed: int = 0) -> Path:
        """Create ``e2e.s.<table>`` (version 0, all sample types, nulls everywhere but ``id``)."""
        return create_sample_table(self.path(table), rows=rows, partitioned=partitioned, cdf=cdf, seed=seed)

    def commit(self, table: str, n: int, seed: int) -> list[str]:
        return apply_random_commits(self.path(table), random.Random(seed), n)

    @staticmethod
    def name(table: str) -> str:
        return f"{SHARE}.{SCHEMA}.{table}"

    # -- recipient side

    def target(self, table: str) -> str:
        return str(self.root / "warehouse" / table)

    def spec(self, table: str, mode: str = "merge", **extra: Any) -> dict[str, Any]:
        """A ``tables:`` entry for ``e2e.s.<table>``; merge mode keys on ``id`` by default."""
        entry: dict[str, Any] = {"name": self.name(table), "target": f"warehouse/{table}", "mode": mode}
        if mode == "merge":
            entry["keys"] = ["id"]
        return {**entry, **extra}

    def raw_config(self, *tables: dict[str, Any], **top: Any) -> dict[str, Any]:
        assert self.server.profile_path is not None
        return {
            "profile": str(self.server.profile_path),
            "state_store": "sqlite:///state/state.db",
            "staging_dir": "staging",
            "tables": list(tables),
            **top,
        }

    def config(self, *tables: dict[str, Any], **top: Any) -> SharesyncConfig:
        """Write ``sharesync.yaml`` (for CLI tests) and return it parsed as the CLI would."""
        raw = self.raw_config(*tables, **top)
        self.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        return parse_config(raw, base_dir=self.root, source=str(self.config_file))

    def engine(self, config: SharesyncConfig, **options: Any) -> SyncEngine:
        engine = SyncEngine(config, **options)
        self._engines.append(engine)
        return engine

    def counting_client(self, config: SharesyncConfig) -> tuple[Any, CountingTransport]:
        from sync.client import SharingClient
        from sync.http import build_http_client
        from sync.profile import load_profile

        transport = CountingTransport()
        http = build_http_client(transport=transport)
        client = SharingClient(load_profile(config.profile), http=http)
        self._closers.append(http.close)
        return client, transport

    def close(self) -> None:
        for engine in self._engines:
            engine.close()
        for close in self._closers:
            close()


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    """Stop the shared Sail engine once the e2e tests are done."""
    yield
    from pipelines.spark import stop_spark

    stop_spark()


@pytest.fixture
def workspace(tmp_path: Path, start_server: Callable[..., SharingServer]) -> Iterator[Workspace]:
    provider = tmp_path / "provider"
    provider.mkdir()
    ws = Workspace(tmp_path, start_server(provider))
    yield ws
    ws.close()


@dataclass(frozen=True)
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``cli("--config", path, "sync")`` runs ``sharesync`` in-process; returns exit code and output."""
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


def never_spark() -> Any:
    """A Spark factory for "must not start the engine" tests."""
    raise AssertionError("the engine was started although there was nothing to do")
