"""What a sync pass works with, owned by one object from open to close.

:class:`PassResources` owns the sharing client of each provider, the state store, the pass's
transfer budget and the Spark engine (:class:`~sharesync.pipelines.jobs.session.SparkEngine`),
the way an httpx ``Client`` owns its connection pool: each is made on first use — a pass with
nothing new creates none of them (no SQLAlchemy, no Spark), and whichever thread asks first
creates each exactly once — and :meth:`PassResources.close` ends them all; asked for anything
after that, it raises instead of quietly making new ones nobody would close.

Targets and staging are located here, with the config's ``storage:`` settings (the one way
they are reached). The CLI's commands and the Dagster checks ask for what they need through
:class:`TableAccess`, the four things they use, not through the pass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol, Self

from sharesync.pipelines.jobs.session import SparkEngine
from sharesync.pipelines.modes.registry import BUILTIN_MODES, ModeRegistry
from sharesync.pipelines.run.clients import make_client
from sharesync.pipelines.run.failures import describe
from sharesync.pipelines.run.services import ProgressFactory, RunServices
from sharesync.sync.core.config import SharesyncConfig
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.location import Location, Place, locate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharesync.state import StateStore
    from sharesync.sync.protocol.budget import TransferBudget
    from sharesync.sync.protocol.client import SharingClient

log = logging.getLogger(__name__)


class TableAccess(Protocol):
    """What a command or a check needs to look at a configured table from outside a pass: the
    config, its provider's client, the state store, and where its target (or staging) is."""

    @property
    def config(self) -> SharesyncConfig: ...

    @property
    def store(self) -> StateStore: ...

    def client_for(self, provider: str) -> SharingClient: ...

    def locate(self, place: Place) -> Location: ...

    @property
    def modes(self) -> ModeRegistry: ...


class PassResources:
    """The clients, store, budget and Spark engine of one config, made on first use, until :meth:`close`.

    Given ones are used as they are and stay their giver's to close: ``client`` serves the
    config's first provider (tests, tools with a client of their own); ``spark`` is a session
    factory used instead of an engine (tests, a caller's own session); ``engine`` is one that
    outlives these resources (a ``sync --every`` process's, across its passes).
    """

    def __init__(
        self,
        config: SharesyncConfig,
        *,
        client: SharingClient | None = None,
        store: StateStore | None = None,
        spark: Callable[[], SparkSession] | None = None,
        progress: ProgressFactory | None = None,
        engine: SparkEngine | None = None,
        modes: ModeRegistry = BUILTIN_MODES,
    ) -> None:
        modes.check(config)  # a table given a mode of its own follows that mode's rules
        self.modes = modes  # which strategy syncs a table: configuration, not a resource to close
        self._config = config
        self._clients: dict[str, SharingClient] = {}
        if client is not None:
            self._clients[next(iter(config.all_providers()))] = client
        self._given = client
        self._owns_engine = engine is None and spark is None
        self._engine = engine
        if spark is None:
            self._engine = engine or SparkEngine(config.spark, config.storage)
            spark = self._engine.session
        self._session = spark
        self._store = store
        self._progress = progress
        self._lock = threading.RLock()  # the lazy resources are created once, whichever thread asks first
        self._closed = False
        self._budget: TransferBudget | None = None
        self._staging_lock = threading.Lock()
        self._staging_problem: str | None = None  # why the remote engine cannot read staging_dir
        self._staging_checked = False

    # ------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        self._check_open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End what these resources made: the clients and, unless given, the engine's session.
        The state store's pool is the process's (one per URL) and stays. Closing twice is fine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            clients, self._clients = self._clients, {}
        for client in clients.values():
            if client is not self._given:
                client.close()
        if self._owns_engine and self._engine is not None:
            self._engine.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                "these sync resources are closed (their clients and Spark session are gone); make a new one"
            )

    # ------------------------------------------------------------ TableAccess

    @property
    def config(self) -> SharesyncConfig:
        return self._config

    def client_for(self, provider: str) -> SharingClient:
        """That provider's client, made on first use: its profile is read (and its token's expiry
        checked) only when one of its tables needs it, so a broken provider fails its tables only."""
        with self._lock:
            self._check_open()
            if provider not in self._clients:
                self._clients[provider] = make_client(self._config, provider)
            return self._clients[provider]

    @property
    def store(self) -> StateStore:
        with self._lock:
            self._check_open()
            if self._store is None:
                from sharesync.state.store import open_store  # SQLAlchemy: only when the store is really used

                days = self._config.run_history_days
                self._store = open_store(self._config.state_store, run_retention=timedelta(days=days) if days else None)
            return self._store

    def locate(self, place: Place) -> Location:
        """``place`` (a target, the staging directory) as every client reaches it with the config's settings."""
        return locate(place, self._config.storage)

    # ------------------------------------------------------------ the pass's own

    @property
    def store_opened(self) -> bool:
        """Whether the state store exists yet (a pass with nothing new may read SQLite without it)."""
        return self._store is not None

    @property
    def budget(self) -> TransferBudget:
        """The downloads and in-memory bytes every table of these resources shares (``defaults``)."""
        with self._lock:
            self._check_open()
            if self._budget is None:
                from sharesync.sync.protocol.budget import TransferBudget

                limits = self._config.defaults
                self._budget = TransferBudget(limits.max_concurrent_downloads, limits.max_staged_megabytes * 2**20)
            return self._budget

    def spark(self) -> SparkSession:
        """The engine's session (or the given factory's), started on first use."""
        self._check_open()
        return self._session()

    def services(self, spark: Callable[[], SparkSession], provider: str) -> RunServices:
        """What one table's run works with (``spark``: :meth:`tracked_spark`)."""
        client = self.client_for(provider)
        return RunServices(self._config, self.store, client, spark, self._progress, self.budget, self.modes)

    def tracked_spark(self, used: list[SparkSession]) -> Callable[[], SparkSession]:
        """:meth:`spark`, remembering the session handed out (to stop that one only if it dies)."""

        def spark() -> SparkSession:
            session = self.spark()
            used.append(session)
            return session

        return spark

    def drop_spark(self, exc: Exception, used: list[SparkSession]) -> None:
        """Stop the dead session (and the embedded engine); the next job starts new ones.

        Only if it is still the current one: tables running in parallel all see it die, and the
        first to stop it must not have a later one stop the new session another table started.
        """
        log.warning("the Spark session is gone (%s); the next table starts a new one", describe(exc))
        if self._engine is not None:
            self._engine.drop(used[-1] if used else None)

    def check_staging(self, spark: Callable[[], SparkSession]) -> None:
        """A ``spark.remote`` engine must read what this process stages: probed once, before any download."""
        if self._config.spark.remote is None:
            return
        with self._staging_lock:
            if not self._staging_checked:
                from sharesync.pipelines.jobs.staging_probe import staging_problem

                staging = self.locate(self._config.staging_dir)
                self._staging_problem = staging_problem(spark(), staging, self._config.spark.remote)
                self._staging_checked = True
        if self._staging_problem is not None:
            raise ConfigError(self._staging_problem)
