"""The sync pass: which tables, in what order and parallelism, each under its lease.

Per table: read the checkpoint and the provider's version (one cheap ``/version`` call; when
nothing is new — and a glance at the target's ``_delta_log`` finds the commit the checkpoint
recorded, :meth:`~sharesync.pipelines.targets.port.TargetFormat.glance` — the pass ends there, without a
lease, metadata or Spark). Otherwise take the
table's lease, decide and plan (:mod:`sharesync.sync.planning.run_plan`), and execute the plan batch by batch:
fetch → prune → download and stage → apply with Spark → advance the checkpoint by
compare-and-swap. The checkpoint moves only after the target commit, and every job is
idempotent, so a crash anywhere repeats at most one batch and never skips or doubles a row.

One table's pass under its lease lives in :mod:`sharesync.pipelines.run.table_run`. Whatever goes
wrong inside it fails that table only and is on record (:mod:`~sharesync.pipelines.run.failure_recorder`);
what a pass works with — clients, store, budget, the Spark engine — is owned, and made on first use,
by :class:`~sharesync.pipelines.run.pass_resources.PassResources`. The CLI, the Dagster assets and the
benchmarks all call :class:`Syncer`, the one entry point; none re-implements a step. (A syncer, not an
engine: "engine" is the Spark engine, :mod:`~sharesync.pipelines.jobs.session`.)

A pass syncs up to ``max_parallel_tables`` tables at once, each in a thread of its own: they share
the sharing client (httpx is thread-safe), the Spark Connect session (its client is made for use
from several threads, and each job names its own tables), the state store (one pooled database per
URL, a connection per call, SQLite writers queued in-process) and one :class:`TransferBudget`
bounding the pass's downloads and in-memory bytes. Results come back in config order.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Self, TypeVar

from sharesync.pipelines.modes.registry import BUILTIN_MODES, ModeRegistry
from sharesync.pipelines.run.circuit import ProviderCircuits
from sharesync.pipelines.run.clients import clients_by_provider, close_clients, make_client, poll_versions
from sharesync.pipelines.run.failure_recorder import FailureRecorder
from sharesync.pipelines.run.failures import Attempt, describe
from sharesync.pipelines.run.pass_resources import PassResources
from sharesync.pipelines.run.results import BackfillRequest, TableOutcome, TableSyncResult
from sharesync.pipelines.run.services import ProgressFactory
from sharesync.pipelines.run.target_check import is_up_to_date, nothing_new
from sharesync.state import Checkpoint
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.core.providers import credentials_refused

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharesync.pipelines.jobs.session import SparkEngine
    from sharesync.pipelines.run.table_run import TableRun
    from sharesync.pipelines.targets.facts import Discarded
    from sharesync.state import StateStore
    from sharesync.sync.core.include_patterns import Selection
    from sharesync.sync.protocol.client import SharingClient
    from sharesync.sync.protocol.retry import RetryPolicy

log = logging.getLogger(__name__)

_IMPORTS = threading.Lock()

V = TypeVar("V")

# (table name) → what the caller holds while that table syncs under its lease: a display of running tables.
TableWatch = Callable[[str], AbstractContextManager[object]]


class Syncer:
    """Runs sync passes for one config, with the :class:`PassResources` it owns until :meth:`close`.

    ``engine``: a Spark engine that outlives this syncer (a ``sync --every`` process's, across its
    passes); by default its resources make their own and close it with themselves.
    """

    def __init__(
        self,
        config: SharesyncConfig,
        *,
        client: SharingClient | None = None,
        store: StateStore | None = None,
        spark: Callable[[], SparkSession] | None = None,
        progress: ProgressFactory | None = None,
        lease_ttl: timedelta | None = None,
        watch: TableWatch | None = None,
        engine: SparkEngine | None = None,
        modes: ModeRegistry = BUILTIN_MODES,
    ) -> None:
        self.declared = config  # as written; ``config`` holds the tables the patterns match now (select)
        self.config = config
        self.selection: Selection | None = None
        self.resources = PassResources(
            config, client=client, store=store, spark=spark, progress=progress, engine=engine, modes=modes
        )
        self.failures = FailureRecorder(self.resources)
        self._watch = watch
        self.lease_ttl = lease_ttl if lease_ttl is not None else timedelta(seconds=config.lease_ttl_seconds)
        self._in_parallel = False  # tables of a pass are syncing in threads right now

    def close(self) -> None:
        """Close its resources (clients, the Spark session unless given); using it afterwards raises."""
        self.resources.close()

    def __enter__(self) -> Self:
        self.resources.__enter__()  # a closed one is not reopened
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ passes

    def source_versions(
        self, names: Iterable[str] | None = None, *, retry: RetryPolicy | None = None
    ) -> dict[str, int | SharesyncError]:
        """The provider's current version of each table by key, polled concurrently (``retry``: with
        clients of their own that try this long). A provider whose profile cannot be read fails its
        own tables only."""
        return self._poll(self._tables(names), retry)

    def _poll(
        self, tables: list[TableConfig], retry: RetryPolicy | None = None, circuits: ProviderCircuits | None = None
    ) -> dict[str, int | SharesyncError]:
        own = retry is not None
        make = (lambda provider: make_client(self.config, provider, retry=retry)) if own else self.resources.client_for
        several = len(self.config.all_providers()) > 1  # one provider's broken profile stops the command
        clients = clients_by_provider({t.provider for t in tables}, make, contain=several)  # before the threads
        try:
            polled = poll_versions(tables, clients, circuits)
        finally:
            if own:
                close_clients(clients)
        return {t.key: self._named(t, polled[t.key]) for t in tables}

    def _named(self, table: TableConfig, polled: V) -> V:
        """A refused credential names the table's provider and profile file, not only the table."""
        return credentials_refused(polled, table.provider, self.config.provider(table.provider).profile)

    def sync_all(self, names: Iterable[str] | None = None, *, parallel: int | None = None) -> list[TableSyncResult]:
        """One pass over all (or the named) tables, ``parallel`` at once (default: the config's
        ``max_parallel_tables``); a failing table never stops the others; results in config order."""
        try:
            unsynced = self._follow_selection(every=names is None) if self.declared.include else []
            return [*self._pass(names, parallel), *unsynced]
        finally:
            _give_ctrl_c_back()

    def select(self) -> Selection:
        """The tables of this pass: the explicit ones and those the ``include:`` patterns match now
        (each selected share listed once); ``config`` holds them from here on."""
        from sharesync.pipelines.run.share_listings import select

        modes = {c.name: c.mode for c in self._stored_checkpoints()}
        self.selection = select(self.declared, self.resources.client_for, modes)
        self.config = self.declared.model_copy(update={"tables": list(self.selection.tables)})
        return self.selection

    def table(self, name: str) -> TableConfig:
        """The table whose key is ``name``, a pattern's too (listing the shares if not done yet)."""
        if self.selection is None and self.declared.include:
            self.select()
        return self.config.table(name)

    def _follow_selection(self, *, every: bool) -> list[TableSyncResult]:
        """Select; a whole pass also reports the matched tables it does not sync."""
        from sharesync.pipelines.run.share_listings import unsynced_results

        selection = self.select()
        if not every or not (selection.removed or selection.needs_keys):
            return []  # the state store is opened only when there is something to report
        return unsynced_results(self.resources.store, selection, self.lease_ttl)

    def _pass(self, names: Iterable[str] | None, parallel: int | None) -> list[TableSyncResult]:
        tables = self._tables(names)
        circuits = ProviderCircuits()  # this pass's: a provider down costs one retry budget (circuit.py)
        versions = self._poll(tables, circuits=circuits)
        checkpoints = {c.name: c for c in self._stored_checkpoints()}

        # Looked at once per pass: a remote target's glance is two requests.
        storage = self.config.storage
        idle = {t.key for t in tables if is_up_to_date(t, versions[t.key], checkpoints.get(t.key), storage)}

        def one(table: TableConfig) -> TableSyncResult:
            return self._pass_table(table, versions[table.key], checkpoints.get(table.key), table.key in idle, circuits)

        busy = [t for t in tables if t.key not in idle and not isinstance(versions[t.key], SharesyncError)]
        workers = min(parallel or self.config.defaults.parallel_tables(), len(busy))
        if workers <= 1:
            return [one(table) for table in tables]
        self._start_spark()
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sharesync-table")
        self._in_parallel = True
        try:
            return list(pool.map(one, tables))  # in config order, whichever finishes first
        finally:
            # Interrupted (Ctrl-C): tables not started yet are not started; running ones finish.
            pool.shutdown(wait=True, cancel_futures=True)
            self._in_parallel = False

    def backfill(self, name: str, request: BackfillRequest) -> TableSyncResult:
        """Replay one table from a moment; its failure is its result, as in a pass."""
        table = self.table(name)
        return self.failures.contain(table, None, time.monotonic(), lambda: self.sync_table(name, backfill=request))

    def _start_spark(self) -> None:
        """Start Spark in this (the main) thread before tables need it in theirs: pyspark cannot be
        imported by two threads at once, and the embedded engine, started from any other thread,
        takes over SIGINT — Ctrl+C would no longer reach Python. A failure is each table's own."""
        try:
            self.resources.spark()
        except Exception as exc:  # noqa: BLE001 - reported by every table that needs the engine
            log.warning("the Spark engine did not start (%s); the tables that need it will fail", describe(exc))

    def _pass_table(
        self,
        table: TableConfig,
        polled: int | SharesyncError,
        checkpoint: Checkpoint | None,
        up_to_date: bool,
        circuits: ProviderCircuits,
    ) -> TableSyncResult:
        """One table's part of a pass; whatever fails becomes its result, never the pass's."""
        started = time.monotonic()
        if isinstance(polled, SharesyncError):
            self.failures.record(table, polled, checkpoint, None)
            return self.failures.failed(table, checkpoint, None, polled, started)
        return self.failures.contain(
            table, polled, started, lambda: self._sync(table, None, polled, checkpoint, up_to_date, circuits)
        )

    def sync_table(
        self,
        name: str,
        *,
        backfill: BackfillRequest | None = None,
        source_version: int | None = None,
        checkpoint: Checkpoint | None = None,
        up_to_date: bool | None = None,
    ) -> TableSyncResult:
        """Sync the table whose key is ``name``; raises what failed it, after putting the failure on record.

        ``up_to_date``: what the caller found for this ``source_version`` and ``checkpoint``
        (a pass looks once per table); None: look here."""
        return self._sync(self.table(name), backfill, source_version, checkpoint, up_to_date)

    def _sync(
        self,
        table: TableConfig,
        backfill: BackfillRequest | None,
        source_version: int | None,
        checkpoint: Checkpoint | None,
        up_to_date: bool | None,
        circuits: ProviderCircuits | None = None,
    ) -> TableSyncResult:
        started = time.monotonic()
        attempt = Attempt()
        used: list[SparkSession] = []
        spark = self.resources.tracked_spark(used)
        try:
            down = circuits.reason(table.provider) if circuits is not None else None
            if down is not None:  # found down by another table this pass: not asked again
                raise down
            if checkpoint is None:
                checkpoint = self.resources.store.get_checkpoint(table.key)
            if source_version is None:
                source_version = self.resources.client_for(table.provider).table_version(table.name).version
            if (
                backfill is None
                and checkpoint is not None
                and (
                    nothing_new(table, checkpoint, source_version, self.config.storage)
                    if up_to_date is None
                    else up_to_date
                )
            ):
                return TableSyncResult(
                    table.key,
                    table.mode,
                    TableOutcome.UP_TO_DATE,
                    checkpoint.version,
                    source_version,
                    seconds=time.monotonic() - started,
                    checkpoint_timestamp=checkpoint.version_timestamp,
                )
            self.resources.check_staging(spark)
            watch = self._watch(table.key) if self._watch is not None else nullcontext()
            with watch, self.resources.store.hold_lease(table.key, ttl=self.lease_ttl) as keeper:
                run = _table_run(spark_too=self._in_parallel)
                services = self.resources.services(spark, table.provider)
                return run(services, table, keeper, attempt).run(backfill, started)
        except (Exception, KeyboardInterrupt) as exc:  # Ctrl+C too: an interrupted bootstrap is on record
            if circuits is not None:
                circuits.trip(table.provider, exc)
            named = self._named(table, exc)
            self.failures.after_attempt(table, named, attempt, used, checkpoint, source_version)
            if named is exc:
                raise
            raise named from exc

    def reset(self, name: str, *, discard_target: bool = False) -> tuple[Checkpoint | None, Discarded | None]:
        """Forget the checkpoint (the next sync keeps an append or history target's rows and
        continues them); ``discard_target``: first remove the target too, under the table's lease."""
        from sharesync.pipelines.targets.delta.format import DELTA

        table = self.table(name)
        if not discard_target:
            return self.resources.store.reset_checkpoint(table.key), None
        store = self.resources.store
        with store.hold_lease(table.key, ttl=self.lease_ttl):  # never under a running sync
            discarded = DELTA.discard(self.resources.locate(table.target), held=self.resources.modes.what_kept)
            return store.reset_checkpoint(table.key), discarded

    # ------------------------------------------------------------ helpers

    def _stored_checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint, for telling which tables have anything new.

        A SQLite store at the current schema is read directly, read-only, with the standard
        library (:mod:`sharesync.state.sqlite`), so a pass with nothing new never imports SQLAlchemy.
        Anything else — PostgreSQL, no database yet, an older or newer schema — goes through
        the store, which creates, migrates or refuses it. Tables with something new re-read
        their checkpoint through the store under their lease.
        """
        if not self.resources.store_opened:
            from sharesync.state.sqlite import read_checkpoints

            checkpoints = read_checkpoints(self.config.state_store)
            if checkpoints is not None:
                return checkpoints
        return self.resources.store.list_checkpoints()

    def _tables(self, names: Iterable[str] | None) -> list[TableConfig]:
        if names is None:
            return list(self.config.tables)
        wanted = {t.key: t for t in map(self.table, names)}  # each table once, however often named
        return list(wanted.values()) or list(self.config.tables)


def _table_run(*, spark_too: bool) -> type[TableRun]:
    """Imported on first use — a pass with nothing new never pays for Arrow, downloads or Spark — by
    one thread at a time. ``spark_too`` (tables in parallel): pyspark as well, before any job imports
    it lazily, as two threads importing pyspark at once fail (its modules import each other in cycles)."""
    with _IMPORTS:
        from sharesync.pipelines.run.table_run import TableRun
    if spark_too:
        from sharesync.pipelines.jobs.session import import_spark_modules

        import_spark_modules()
    return TableRun


def _give_ctrl_c_back() -> None:
    """After a pass, on the main thread: the embedded engine takes SIGINT when its first session
    starts, and a start on another thread (a bootstrap's early start, left unwaited when its batch
    failed first) would leave it taken for every later pass of a process that keeps running."""
    if "sharesync.pipelines.jobs.session" in sys.modules:
        from sharesync.pipelines.jobs.session import keep_ctrl_c

        keep_ctrl_c()


__all__ = ["BackfillRequest", "Syncer", "TableOutcome", "TableSyncResult"]
