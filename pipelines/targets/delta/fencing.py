"""Stale-writer fencing on the engines that honour Delta's idempotent writes (:mod:`sharesync.sync.core.fence`).

The run opens a :class:`Fence` per lease holding and wraps each batch's jobs in :func:`fencing`;
inside it, every target commit takes the holding's next number:

* DataFrame writes (creating, appending, overwriting a target; the empty ``mergeSchema`` appends
  that add columns; widening and conforming rewrites) through the writer options
  ``txnAppId``/``txnVersion`` (:func:`fenced`): per write, so tables writing at once in one
  session never see each other's. A writer takes its number in the call that saves it
  (``fenced(writer).save(path)``): numbers must follow the order of the commits, or the holding's
  own later commit would make Delta skip an earlier-numbered one saved after it.
* MERGE and DELETE through the session settings ``spark.databricks.delta.write.txnAppId`` /
  ``…txnVersion`` (Delta 2.3 and later; :func:`fenced_dml`). A setting holds for the whole
  session, which the tables of a pass share: so the statement runs under a lock with the
  settings set just for it and removed after, and every DataFrame write of a target carries its
  own options (which Delta reads instead of the session's). Fenced MERGE and DELETE statements of
  tables syncing in parallel therefore run one at a time on such an engine.

Which engine honours them is asked once per holding: Delta Lake on Spark knows the setting
``spark.databricks.delta.write.txnVersion.autoReset.enabled``; Sail refuses to read it, ignores
the writer options, and records no ``txn`` action (checked on pysail 0.7.2), so there DML runs as
before and nothing is fenced. The job code reaches the fence of its thread through a context
variable — one table's run is one thread, and the jobs of every mode stay free of a parameter that
only one engine uses.

After a batch's jobs, the target's recorded number for the table's id must not be above the last
one this holding used (:func:`~sharesync.sync.core.fence.overtaken`): otherwise a later holding
wrote and Delta skipped this holding's commits from then on — :class:`FencedOut`, a lost lease, so
a skipped write is never taken for an applied one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING

from sharesync.sync.core.errors import FencedOut
from sharesync.sync.core.fence import app_id, overtaken, txn_version
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrameWriter, SparkSession

__all__ = ["Fence", "fenced", "fenced_dml", "fencing", "speaks_delta_lake"]

_APP_ID, _VERSION = "spark.databricks.delta.write.txnAppId", "spark.databricks.delta.write.txnVersion"
_DELTA_PROBE = "spark.databricks.delta.write.txnVersion.autoReset.enabled"  # Delta >= 2.3 defines it

_current: ContextVar[Fence | None] = ContextVar("sharesync_fence", default=None)
_dml_lock = threading.Lock()  # a fenced statement's session settings are the session's: one at a time


class Fence:
    """The fencing numbers of one lease holding of ``table_key``'s ``target``."""

    def __init__(self, table_key: str, target: Location, acquired_at: datetime) -> None:
        self.app_id = app_id(table_key)
        self.target = target
        self._acquired_at = acquired_at
        self._sequence = 0
        self._honoured: bool | None = None  # does the engine fence DML? asked once
        self.records: bool | None = None  # False once a fenced commit left no record: nothing to check

    @property
    def last(self) -> int | None:
        """The number of this holding's latest fenced commit; None before its first."""
        return txn_version(self._acquired_at, self._sequence) if self._sequence else None

    def next(self) -> int:
        self._sequence += 1
        return txn_version(self._acquired_at, self._sequence)

    def honoured(self, session: SparkSession) -> bool:
        if self._honoured is None:
            self._honoured = speaks_delta_lake(session)
        return self._honoured


def speaks_delta_lake(session: SparkSession) -> bool:
    """Whether the engine is Delta Lake on Spark (its settings, its SQL: OPTIMIZE, VACUUM), not Sail."""
    try:
        session.conf.get(_DELTA_PROBE)
    except Exception:  # noqa: BLE001 - an engine without Delta's setting says so in its own way
        return False
    return True


def fenced(writer: DataFrameWriter) -> DataFrameWriter:
    """``writer`` with the current holding's next fencing number (unchanged outside :func:`fencing`)."""
    fence = _current.get()
    if fence is None:
        return writer
    return writer.option("txnAppId", fence.app_id).option("txnVersion", str(fence.next()))


@contextmanager
def fenced_dml(session: SparkSession) -> Iterator[None]:
    """Run the MERGE or DELETE statement of the block under the holding's next fencing number."""
    fence = _current.get()
    if fence is None or not fence.honoured(session):
        yield
        return
    with _dml_lock:
        session.conf.set(_APP_ID, fence.app_id)
        session.conf.set(_VERSION, str(fence.next()))
        try:
            yield
        finally:
            # A dead session keeps nothing, and the statement's own error is the one to report.
            with contextlib.suppress(Exception):
                session.conf.unset(_VERSION)
                session.conf.unset(_APP_ID)


@contextmanager
def fencing(fence: Fence | None) -> Iterator[None]:
    """The jobs of the block write under ``fence``; raises :class:`FencedOut` if a later holder overtook it."""
    if fence is None:
        yield
        return
    token = _current.set(fence)
    try:
        yield
    finally:
        _current.reset(token)
    if (last := fence.last) is not None and fence.records is not False:
        recorded = _recorded(fence)
        if recorded is None:  # its commits left no record: an engine that ignores the fence (Sail)
            fence.records = False
        elif overtaken(recorded, last):
            raise FencedOut(
                f"lease of {fence.app_id.removeprefix('sharesync:')} was lost: a later holder of it wrote to "
                f"target '{fence.target}' (its Delta transaction record for {fence.app_id} is at {recorded}, this "
                f"holder's last write at {last}), so the engine skipped this holder's writes from then on; the "
                "checkpoint stays where it was and the next sync continues from it"
            )


def _recorded(fence: Fence) -> int | None:
    from sharesync.pipelines.targets.delta.open import open_target

    version = open_target(fence.target).transaction_version(fence.app_id)
    return None if version is None else int(version)
