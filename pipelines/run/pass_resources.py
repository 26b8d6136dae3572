"""What a sync pass works with — the service locator of :class:`~sharesync.pipelines.run.sync_pass.SyncEngine`.

The sharing clients, the state store, the pass's transfer budget and the runtime (Spark engine,
storage settings, target access: :class:`~sharesync.pipelines.jobs.runtime.Runtime`), each made
on first use: a pass with nothing new creates none of them (no SQLAlchemy, no Spark), and
whichever thread asks first creates each exactly once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.runtime import Runtime
from sharesync.pipelines.run.clients import make_client
from sharesync.pipelines.run.failures import describe
from sharesync.pipelines.run.services import ProgressFactory, RunServices
from sharesync.sync.core.config import SharesyncConfig
from sharesync.sync.core.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharesync.state import StateStore
    from sharesync.sync.protocol.budget import TransferBudget
    from sharesync.sync.protocol.client import SharingClient

log = logging.getLogger(__name__)


class PassResources:
    """The lazy client, store, budget and Spark of one config (given ones are used as they are)."""

    def __init__(
        self,
        config: SharesyncConfig,
        *,
        client: SharingClient | None = None,
        store: StateStore | None = None,
        spark: Callable[[], SparkSession] | None = None,
        progress: ProgressFactory | None = None,
        runtime: Runtime | None = None,
    ) -> None:
        self.config = config
        # A given client serves the first provider (tests, tools with a client of their own).
        self._clients: dict[str, SharingClient] = {}
        if client is not None:
            self._clients[next(iter(config.all_providers()))] = client
        self._given = client
        # A runtime given (a ``sync --every`` process's, across its passes) is its giver's to close.
        self._owns_runtime = runtime is None
        self.runtime = runtime or Runtime(config.spark, config.storage, session=spark)
        self._store = store
        self._progress = progress
        self._lock = threading.RLock()  # the lazy resources are created once, whichever thread asks first
        self._budget: TransferBudget | None = None
        self._staging_lock = threading.Lock()
        self._staging_problem: str | None = None  # why the remote engine cannot read staging_dir
        self._staging_checked = False

    @property
    def client(self) -> SharingClient:
        """The client of the config's first provider (the one of a one-provider config)."""
        return self.client_for(next(iter(self.config.all_providers())))

    def client_for(self, provider: str) -> SharingClient:
        """That provider's client, made on first use: its profile is read (and its token's expiry
        checked) only when one of its tables needs it, so a broken provider fails its tables only."""
        with self._lock:
            if provider not in self._clients:
                self._clients[provider] = make_client(self.config, provider)
            return self._clients[provider]

    @property
    def store_opened(self) -> bool:
        """Whether the state store exists yet (a pass with nothing new may read SQLite without it)."""
        return self._store is not None

    @property
    def store(self) -> StateStore:
        with self._lock:
            if self._store is None:
                from sharesync.state.store import open_store  # SQLAlchemy: only when the store is really used

                days = self.config.run_history_days
                self._store = open_store(self.config.state_store, run_retention=timedelta(days=days) if days else None)
            return self._store

    @property
    def budget(self) -> TransferBudget:
        """The downloads and in-memory bytes every table this engine syncs shares (``defaults``)."""
        with self._lock:
            if self._budget is None:
                from sharesync.sync.protocol.budget import TransferBudget

                limits = self.config.defaults
                self._budget = TransferBudget(limits.max_concurrent_downloads, limits.max_staged_megabytes * 2**20)
            return self._budget

    def spark(self) -> SparkSession:
        return self.runtime.spark()

    def services(self, spark: Callable[[], SparkSession], provider: str) -> RunServices:
        client = self.client_for(provider)
        return RunServices(self.config, self.store, client, self.runtime, spark, self._progress, self.budget)

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
        self.runtime.drop_spark(used[-1] if used else None)

    def check_staging(self, spark: Callable[[], SparkSession]) -> None:
        """A ``spark.remote`` engine must read what this process stages: probed once, before any download."""
        if self.config.spark.remote is None:
            return
        with self._staging_lock:
            if not self._staging_checked:
                from sharesync.pipelines.jobs.staging_probe import staging_problem

                staging = self.runtime.locate(self.config.staging_dir)
                self._staging_problem = staging_problem(spark(), staging, self.config.spark.remote)
                self._staging_checked = True
        if self._staging_problem is not None:
            raise ConfigError(self._staging_problem)

    def close(self) -> None:
        for client in self._clients.values():
            if client is not self._given:
                client.close()
        if self._owns_runtime:
            self.runtime.close()
