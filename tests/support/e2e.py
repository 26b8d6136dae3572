"""What the end-to-end tests share besides fixtures: the workspace, request counting, CLI results.

A module with its own name (not ``conftest``), so that other suites can import from it
without two ``conftest`` modules on ``sys.path`` shadowing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from sharesync.pipelines.run.sync_pass import Syncer
from sharesync.state import StateStore
from sharesync.sync.core.config import SharesyncConfig, parse_config
from sharesync.sync.core.errors import StateStoreUnavailable
from support.faults import SharingServer
from support.provider_tables import ProviderTables

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


class Workspace(ProviderTables):
    """One test's provider, server, config and engines, all under ``tmp_path``."""

    share, schema = SHARE, SCHEMA

    def __init__(self, root: Path, server: SharingServer, spark: dict[str, Any] | None = None) -> None:
        self.root = root
        self.spark = spark or {}  # the config's spark: section for the engine under test ({} = embedded)
        self.provider = server.root
        self.server = server
        self.config_file = root / "sharesync.yaml"
        self._syncers: list[Syncer] = []
        self._closers: list[Callable[[], None]] = []

    # -- recipient side (the provider side: ProviderTables)

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
            **({"spark": self.spark} if self.spark else {}),
            **top,
        }

    def config(self, *tables: dict[str, Any], **top: Any) -> SharesyncConfig:
        """Write ``sharesync.yaml`` (for CLI tests) and return it parsed as the CLI would."""
        raw = self.raw_config(*tables, **top)
        self.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        return parse_config(raw, base_dir=self.root, source=str(self.config_file))

    def syncer(self, config: SharesyncConfig, **options: Any) -> Syncer:
        syncer = Syncer(config, **options)
        self._syncers.append(syncer)
        return syncer

    def counting_client(self, config: SharesyncConfig) -> tuple[Any, CountingTransport]:
        from sharesync.sync.protocol.client import SharingClient
        from sharesync.sync.protocol.profile import load_profile
        from sharesync.sync.protocol.transport import build_http_client

        transport = CountingTransport()
        http = build_http_client(transport=transport)
        client = SharingClient(load_profile(config.profile), http=http)
        self._closers.append(http.close)
        return client, transport

    def close(self) -> None:
        for syncer in self._syncers:
            syncer.close()
        for close in self._closers:
            close()


def never_spark() -> Any:
    """A Spark factory for "must not start the engine" tests."""
    raise AssertionError("the engine was started although there was nothing to do")


class FlakyStore:
    """A state store whose ``fail_on``-th checkpoint write fails: the crash between a target commit
    and its checkpoint, after which the next pass applies that batch again."""

    def __init__(self, store: StateStore, fail_on: int) -> None:
        self._store = store
        self.writes = 0
        self.fail_on = fail_on

    def advance_checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        if self.writes == self.fail_on:
            raise StateStoreUnavailable("injected: the state store went away")
        return self._store.advance_checkpoint(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)
