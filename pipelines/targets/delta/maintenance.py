"""Compaction and vacuum of a Delta target, each with the engine's own means.

* Delta Lake on Apache Spark: ``OPTIMIZE`` bins small files together and rewrites files with
  deletion vectors; a ``REORG TABLE … APPLY (PURGE)`` follows only when rows hidden by deletion
  vectors are left after it. ``VACUUM … RETAIN n HOURS`` removes the files no version within the
  retention needs (below Delta's 168 h check only when the caller asked for that retention;
  Delta 4.4 logs that it keeps the table's ``delta.deletedFileRetentionDuration`` for any N but 0).
* Sail 0.7.2 parses none of ``OPTIMIZE``, ``REORG`` and ``VACUUM`` (checked). Compaction is the
  engine's own read of the table and an overwrite with it in a few files: one commit, the same
  rows (checked against the log before and after), the same table id and properties, so the
  identity check still knows the table. Sail ignores ``dataChange=false`` and records the
  rewrite as a data change (so it is not asked for); the commit carries :data:`COMPACTION_MARKER`. Vacuum is
  ``deltalake``'s, which writes no data (two commitInfo-only commits) and deletes only files
  the log's tombstones name: a replaced file's deletion-vector file stays (a few bytes each).

Every commit here goes through the holding's fence (:mod:`~sharesync.pipelines.targets.delta.fencing`);
the caller holds the table's lease, so no sync writes meanwhile.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.fencing import fenced_dml, speaks_delta_lake
from sharesync.pipelines.targets.delta.maintenance_facts import COMPACTION_MARKER, read_health
from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.delta.write import DELETION_VECTORS_PROPERTY, WRITER
from sharesync.pipelines.targets.health import MIB, Compacted, TargetHealth, Thresholds, Vacuumed
from sharesync.sync.core.errors import TargetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharesync.sync.core.location import Location

__all__ = ["DELTA_RETENTION_HOURS", "compact", "enable_deletion_vectors", "vacuum"]

DELTA_RETENTION_HOURS = 168  # delta.deletedFileRetentionDuration's default: 7 days
_FILE_BYTES = 128 * MIB  # what a rewrite aims at per file
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def compact(spark: SparkSession, target: Location, thresholds: Thresholds) -> Compacted:
    """Fold the target's small files and deletion vectors into well-sized files, keeping its rows."""
    before = _health(target, thresholds)
    if speaks_delta_lake(spark):
        name = WRITER.register(spark, target)
        with fenced_dml(spark):
            spark.sql(f"OPTIMIZE {name}").collect()
        how = "OPTIMIZE"
        if _health(target, thresholds).deleted_rows:
            with fenced_dml(spark):
                spark.sql(f"REORG TABLE {name} APPLY (PURGE)").collect()
            how += " + REORG PURGE"
    else:
        _rewrite(spark, target, before)
        how = "rewrite (read + overwrite)"
    after = _health(target, thresholds)
    if after.live_rows != before.live_rows:
        raise TargetError(
            f"compaction of target '{target}' left {after.live_rows} rows where there were {before.live_rows}: "
            "another writer changed the table meanwhile; compare it with 'sharesync verify --full'"
        )
    return Compacted(before, after, how)


def _rewrite(spark: SparkSession, target: Location, before: TargetHealth) -> None:
    live_bytes = before.bytes * (1 - before.deleted_ratio)
    files = max(1, math.ceil(live_bytes / _FILE_BYTES))
    # Through the format's writer, the one place a DataFrame save takes its fencing number.
    WRITER.save(WRITER.read(spark, target).coalesce(files), target, mode="overwrite", record=COMPACTION_MARKER)


def enable_deletion_vectors(spark: SparkSession, target: Location) -> bool:
    """Make a copy-on-write target merge-on-read; False when its deletion vectors were on already.

    A property change, one metadata commit on either engine (``ALTER TABLE … SET TBLPROPERTIES`` on
    the table's catalog name: Sail finds no ``delta.`path``` table to alter): the files stay as
    they are, and the next MERGE, DELETE or UPDATE marks the rows it replaces instead of copying.
    """
    if open_target(target).metadata().configuration.get(DELETION_VECTORS_PROPERTY, "false").lower() == "true":
        return False
    name = WRITER.register(spark, target)
    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('{DELETION_VECTORS_PROPERTY}' = 'true')").collect()
    return True


def vacuum(spark: SparkSession, target: Location, retain_hours: int) -> Vacuumed:
    """Remove the files no version of the last ``retain_hours`` needs."""
    if speaks_delta_lake(spark):
        name = WRITER.register(spark, target)
        short = retain_hours < DELTA_RETENTION_HOURS  # Delta refuses it unless its check is off
        if short:
            spark.conf.set(_RETENTION_CHECK, "false")
        try:
            spark.sql(f"VACUUM {name} RETAIN {int(retain_hours)} HOURS").collect()
        finally:
            if short:
                spark.conf.unset(_RETENTION_CHECK)
        metrics = open_target(target).history(1)[0].get("operationMetrics") or {}
        deleted = metrics.get("numDeletedFiles")
        return Vacuumed(None if deleted is None else int(deleted), f"VACUUM RETAIN {retain_hours} HOURS")
    removed = open_target(target).vacuum(retention_hours=retain_hours, dry_run=False, enforce_retention_duration=False)
    # deltalake lists a removed file by its relative path and again by its full one
    return Vacuumed(len({path.rsplit("/", 1)[-1] for path in removed}), "deltalake vacuum")


def _health(target: Location, thresholds: Thresholds) -> TargetHealth:
    health = read_health(target, thresholds.small_file_bytes)
    if health is None:
        raise TargetError(f"target '{target}' has no Delta table to compact")
    return health
