"""The sync engine: one pass over the configured tables, each incrementally and exactly once.

Per table: read the checkpoint and the provider's version (one cheap ``/version`` call; when
nothing is new — and a glance at the target's ``_delta_log`` finds the commit the checkpoint
recorded, :func:`~sharesync.pipelines.jobs.identity.glance` — the pass ends there, without a
lease, metadata or Spark). Otherwise take the
table's lease, plan (:func:`sharesync.sync.planning.plan_sync`), and execute the plan batch by batch:
fetch → prune → download and stage → apply with Spark → advance the checkpoint by
compare-and-swap. The checkpoint moves only after the target commit, and every job is
idempotent, so a crash anywhere repeats at most one batch and never skips or doubles a row.

One table's pass under its lease lives in :mod:`sharesync.pipelines.run.table_run`. Whatever goes
wrong inside it — ours or a library's — fails that table only (:mod:`~sharesync.pipelines.run.failures`
says whether it is transient) and is on record in the run history; when it left the Spark session
unusable, the session is stopped and the next table starts a new one. The CLI and the Dagster assets
both call :class:`SyncEngine`; neither re-implements a step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import TYPE_CHECKING, Self

from sharesync.pipelines.jobs.identity import Glance, glance
from sharesync.pipelines.run.failures import Attempt, describe, is_transient, record_failure, session_gone
from sharesync.pipelines.run.results import BackfillRequest, TableOutcome, TableSyncResult
from sharesync.pipelines.run.services import ProgressFactory, RunServices
from sharesync.state import Checkpoint
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.core.storage import use_storage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharesync.state import StateStore
    from sharesync.sync.protocol.client import SharingClient

log = logging.getLogger(__name__)

POLL_WORKERS = 32


class SyncEngine:
    """Runs sync passes for one config. Clients, store and Spark are created on first use."""

    def __init__(
        self,
        config: SharesyncConfig,
        *,
        client: SharingClient | None = None,
        store: StateStore | None = None,
        spark: Callable[[], SparkSession] | None = None,
        progress: ProgressFactory | None = None,
        lease_ttl: timedelta | None = None,
    ) -> None:
        # Targets and staging in object storage: this process's settings (storage.use_storage).
        use_storage(config.storage, embedded_engine=config.spark.remote is None)
        self.config = config
        self._client = client
        self._store = store
        self._spark_factory = spark
        self._progress = progress
        self.lease_ttl = lease_ttl if lease_ttl is not None else timedelta(seconds=config.lease_ttl_seconds)

    # ------------------------------------------------------------ resources (lazy)

    @property
    def client(self) -> SharingClient:
        if self._client is None:
            from sharesync.sync.protocol.client import SharingClient
            from sharesync.sync.protocol.profile import check_expiry, load_profile

            profile = load_profile(self.config.profile)
            check_expiry(profile)
            self._client = SharingClient(profile, ca_bundle=self.config.ca_bundle)
        return self._client

    @property
    def store(self) -> StateStore:
        if self._store is None:
            from sharesync.state.store import open_store  # SQLAlchemy: only when the store is really used

            self._store = open_store(self.config.state_store)
        return self._store

    def spark(self) -> SparkSession:
        if self._spark_factory is not None:
            return self._spark_factory()
        from sharesync.pipelines.jobs.session import get_spark

        return get_spark(self.config.spark)

    def _services(self) -> RunServices:
        return RunServices(self.config, self.store, self.client, self.spark, self._progress)

    def _drop_spark(self, exc: Exception) -> None:
        """Stop the dead session (and the embedded engine); the next job starts new ones."""
        from sharesync.pipelines.jobs.session import stop_spark

        log.warning("the Spark session is gone (%s); the next table starts a new one", describe(exc))
        stop_spark()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ passes

    def source_versions(self, names: Iterable[str] | None = None) -> dict[str, int | SharesyncError]:
        """The provider's current version of each table, polled concurrently."""
        tables = self._tables(names)

        def poll(table: TableConfig) -> int | SharesyncError:
            try:
                return self.client.table_version(table.name).version
            except SharesyncError as exc:
                return exc

        self.client  # noqa: B018 - create the shared client before the threads use it
        with ThreadPoolExecutor(max_workers=min(POLL_WORKERS, max(1, len(tables)))) as pool:
            return dict(zip([t.name for t in tables], pool.map(poll, tables), strict=True))

    def sync_all(self, names: Iterable[str] | None = None) -> list[TableSyncResult]:
        """One pass over all (or the named) tables; a failing table never stops the others."""
        tables = self._tables(names)
        versions = self.source_versions([t.name for t in tables])
        checkpoints = {c.name: c for c in self._stored_checkpoints()}
        results = []
        for table in tables:
            polled = versions[table.name]
            started = time.monotonic()
            if isinstance(polled, SharesyncError):
                self._record_failure(table, polled, checkpoints.get(table.name), None)
                results.append(self._failed(table, checkpoints.get(table.name), None, polled, started))
                continue
            try:
                results.append(
                    self.sync_table(table.name, source_version=polled, checkpoint=checkpoints.get(table.name))
                )
            except Exception as exc:  # noqa: BLE001 - one table's failure, whatever raised it, is that table's only
                results.append(self._failed(table, self._checkpoint_after_failure(table), polled, exc, started))
        return results

    def sync_table(
        self,
        name: str,
        *,
        backfill: BackfillRequest | None = None,
        source_version: int | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> TableSyncResult:
        """Sync one table; raises what failed it, after putting the failure on record."""
        table = self.config.table(name)
        started = time.monotonic()
        attempt = Attempt()
        try:
            if checkpoint is None:
                checkpoint = self.store.get_checkpoint(table.name)
            if source_version is None:
                source_version = self.client.table_version(table.name).version
            if backfill is None and checkpoint is not None and _nothing_new(table, checkpoint, source_version):
                return TableSyncResult(
                    table.name,
                    table.mode,
                    TableOutcome.UP_TO_DATE,
                    checkpoint.version,
                    source_version,
                    seconds=time.monotonic() - started,
                    checkpoint_timestamp=checkpoint.version_timestamp,
                )
            with self.store.hold_lease(table.name, ttl=self.lease_ttl) as keeper:
                # Imported here: a pass with nothing new never pays for Arrow, downloads or Spark.
                from sharesync.pipelines.run.table_run import TableRun

                return TableRun(self._services(), table, keeper, attempt).run(backfill, started)
        except Exception as exc:
            if session_gone(exc):
                self._drop_spark(exc)
            if not attempt.recorded:  # failed before (or between) its batches: on record all the same
                self._record_failure(table, exc, checkpoint, source_version)
            raise

    def reset(self, name: str) -> Checkpoint | None:
        table = self.config.table(name)
        return self.store.reset_checkpoint(table.name)

    # ------------------------------------------------------------ helpers

    def _stored_checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint, for telling which tables have anything new.

        A SQLite store at the current schema is read directly, read-only, with the standard
        library (:mod:`sharesync.state.sqlite`), so a pass with nothing new never imports SQLAlchemy.
        Anything else — PostgreSQL, no database yet, an older or newer schema — goes through
        the store, which creates, migrates or refuses it. Tables with something new re-read
        their checkpoint through the store under their lease.
        """
        if self._store is None:
            from sharesync.state.sqlite import read_checkpoints

            checkpoints = read_checkpoints(self.config.state_store)
            if checkpoints is not None:
                return checkpoints
        return self.store.list_checkpoints()

    def _tables(self, names: Iterable[str] | None) -> list[TableConfig]:
        if names is None:
            return list(self.config.tables)
        wanted = list(names)
        return [self.config.table(n) for n in wanted] if wanted else list(self.config.tables)

    def _record_failure(
        self, table: TableConfig, exc: Exception, checkpoint: Checkpoint | None, source_version: int | None
    ) -> None:
        try:
            store = self.store
        except SharesyncError as error:  # the store is what failed: the result still reports the failure
            log.warning("could not record the failure of %s: %s", table.name, error)
            return
        version = checkpoint.version if checkpoint else None
        record_failure(store, table.name, exc, checkpoint=version, source=source_version)

    def _checkpoint_after_failure(self, table: TableConfig) -> Checkpoint | None:
        """Where the failed table stands now (batches before the failure may have advanced it)."""
        try:
            return self.store.get_checkpoint(table.name)
        except SharesyncError:  # the store is what failed: the result still reports the failure
            return None

    def _failed(
        self,
        table: TableConfig,
        checkpoint: Checkpoint | None,
        source_version: int | None,
        exc: Exception,
        started: float,
    ) -> TableSyncResult:
        # Reported to the caller in the result (the CLI prints it, Dagster fails the asset); a
        # library's exception keeps its traceback in the log (``-v``) for whoever debugs it.
        transient = is_transient(exc)
        kind = "transient" if transient else "permanent"
        log.info("%s: failed (%s): %s", table.name, kind, describe(exc), exc_info=not isinstance(exc, SharesyncError))
        return TableSyncResult(
            table.name,
            table.mode,
            TableOutcome.FAILED,
            checkpoint.version if checkpoint else None,
            source_version,
            error=describe(exc),
            transient=transient,
            exception=exc,
            seconds=time.monotonic() - started,
            checkpoint_timestamp=checkpoint.version_timestamp if checkpoint else None,
        )


def _nothing_new(table: TableConfig, checkpoint: Checkpoint, source_version: int) -> bool:
    """The checkpoint is at the provider's version, for this target, and the target still ends
    with the commit it recorded (a checkpoint written before sharesync recorded its target is
    not looked at, until its next batch)."""
    if checkpoint.version != source_version or checkpoint.target != table.target:
        return False
    if checkpoint.mode != table.mode.value:
        return False
    if checkpoint.target_version is None:
        return True
    return glance(table.target, checkpoint.target_version, checkpoint.updated_at) is Glance.SAME


__all__ = ["BackfillRequest", "SyncEngine", "TableOutcome", "TableSyncResult"]
