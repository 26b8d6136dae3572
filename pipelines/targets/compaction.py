"""Compacting a target: when a sync does it after a batch, and the one line that says what was done.

Shared by ``sharesync optimize`` (:mod:`~sharesync.pipelines.commands.maintenance_run`) and a
sync's own upkeep (:mod:`~sharesync.pipelines.run.upkeep`); the caller holds the table's lease
and fence. The engine's statement or rewrite is the port's (``DELTA.compact``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.health import Thresholds, auto_compaction_reason

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import SparkSession

    from sharesync.sync.core.location import Location

__all__ = ["compact_after_batch", "compact_for"]


def compact_after_batch(spark: Callable[[], SparkSession], target: Location, thresholds: Thresholds) -> str | None:
    """A sync's own upkeep, under its lease and fence: compact when a threshold is reached (never
    a target smaller than one well-sized file); None when the target is healthy. The engine is
    asked for only when there is a compaction to run (a pass that wrote nothing may not have one)."""
    health = DELTA.health(target, thresholds)
    reason = None if health is None else auto_compaction_reason(health, thresholds)
    return None if reason is None else compact_for(spark(), target, thresholds, reason)


def compact_for(spark: SparkSession, target: Location, thresholds: Thresholds, reason: str) -> str:
    done = DELTA.compact(spark, target, thresholds)
    return (
        f"compacted ({reason}) with {done.how}: {done.before.files} → {done.after.files} files, "
        f"{done.before.deleted_rows} → {done.after.deleted_rows} deleted rows, {done.after.live_rows} rows kept"
    )
