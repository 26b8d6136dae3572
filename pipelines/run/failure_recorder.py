"""Each table's failure contained and on record: a failing table never stops a pass's others.

Whatever goes wrong in one table's pass — ours or a library's — becomes that table's result
(:class:`~sharesync.pipelines.run.results.TableSyncResult` with ``FAILED``; whether it is transient
is :mod:`~sharesync.pipelines.run.failures`' call) and a failed run in the run history, unless a
batch already recorded it. When it left the Spark session unusable, the session is stopped and
the next table starts a new one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from sharesync.pipelines.run.failures import Attempt, describe, is_transient, record_failure, session_gone
from sharesync.pipelines.run.pass_resources import PassResources
from sharesync.pipelines.run.results import TableOutcome, TableSyncResult
from sharesync.state import Checkpoint
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.errors import SharesyncError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class FailureRecorder:
    """Puts each table's failure on record and turns it into the table's result."""

    def __init__(self, resources: PassResources) -> None:
        self._resources = resources

    def contain(
        self, table: TableConfig, source_version: int | None, started: float, sync: Callable[[], TableSyncResult]
    ) -> TableSyncResult:
        """``sync()``'s result, or its failure as the table's result (``sync`` recorded it)."""
        try:
            return sync()
        except Exception as exc:  # noqa: BLE001 - one table's failure, whatever raised it, is that table's only
            return self.failed(table, self._checkpoint_now(table), source_version, exc, started)

    def after_attempt(
        self,
        table: TableConfig,
        exc: BaseException,
        attempt: Attempt,
        used: list[SparkSession],
        checkpoint: Checkpoint | None,
        source_version: int | None,
    ) -> None:
        """What a failed attempt leaves behind: a dead session stopped, the failure on record
        (unless a batch put it there); a Ctrl+C (KeyboardInterrupt) is recorded as an interruption."""
        if isinstance(exc, Exception) and session_gone(exc):
            self._resources.drop_spark(exc, used)
        if not attempt.recorded:  # failed before (or between) its batches: on record all the same
            self.record(table, exc, checkpoint, source_version)

    def record(
        self, table: TableConfig, exc: BaseException, checkpoint: Checkpoint | None, source_version: int | None
    ) -> None:
        try:
            store = self._resources.store
        except SharesyncError as error:  # the store is what failed: the result still reports the failure
            log.warning("could not record the failure of %s: %s", table.key, error)
            return
        version = checkpoint.version if checkpoint else None
        record_failure(store, table.key, exc, checkpoint=version, source=source_version)

    def failed(
        self,
        table: TableConfig,
        checkpoint: Checkpoint | None,
        source_version: int | None,
        exc: Exception,
        started: float,
    ) -> TableSyncResult:
        """The failed table's result; the CLI prints it, Dagster fails the asset. A library's
        exception keeps its traceback in the log (``-v``) for whoever debugs it."""
        transient = is_transient(exc)
        kind = "transient" if transient else "permanent"
        log.info("%s: failed (%s): %s", table.key, kind, describe(exc), exc_info=not isinstance(exc, SharesyncError))
        return TableSyncResult(
            table.key,
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

    def _checkpoint_now(self, table: TableConfig) -> Checkpoint | None:
        """Where the failed table stands now (batches before the failure may have advanced it)."""
        try:
            return self._resources.store.get_checkpoint(table.key)
        except SharesyncError:  # the store is what failed: the result still reports the failure
            return None
