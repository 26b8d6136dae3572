"""The Delta target format: the one implementation of :class:`~sharesync.pipelines.targets.port.TargetFormat`.

Each method hands over to the module that does it (read with ``deltalake``, no Spark, except
the :attr:`writer` the jobs use); this class only gathers them behind the port.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta import (
    commit_metrics,
    commit_record,
    discard,
    history_rows,
    identity,
    maintenance,
    maintenance_facts,
    preflight,
    stats,
    write,
)
from sharesync.pipelines.targets.delta.open import open_existing
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.pipelines.targets.facts import S, Written
from sharesync.pipelines.targets.port import TargetFormat, TargetWriter

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from sharesync.pipelines.targets.facts import Discarded, Glance, TargetIdentity, TargetStats
    from sharesync.pipelines.targets.health import Compacted, TargetHealth, Thresholds, Vacuumed
    from sharesync.pipelines.targets.record import Recorded
    from sharesync.pipelines.targets.state import TargetState
    from sharesync.sync.core.location import Location
    from sharesync.sync.core.storage import StorageSection

__all__ = ["DELTA", "DeltaFormat"]


class DeltaFormat:
    """Delta Lake targets: written by the Spark engine, read with ``deltalake``."""

    @property
    def writer(self) -> TargetWriter:
        return write.WRITER

    def glance(self, target: str, version: int, checkpoint_written: datetime | None, storage: StorageSection) -> Glance:
        return identity.glance(target, version, checkpoint_written, storage)

    def identity(self, target: Location, *, since: int | None = None) -> TargetIdentity | None:
        return identity.read_identity(target, since=since)

    def high_water_mark(self, target: Location, *columns: str) -> int | None:
        return identity.high_water_mark(target, *columns)

    def history_start(self, target: Location) -> int | None:
        return history_rows.history_start(target)

    def inspect(self, target: Location) -> TargetState:
        return preflight.inspect_target(target)

    def stats(self, target: Location, *, soft_delete: bool = False) -> TargetStats | None:
        return stats.read_target_stats(target, soft_delete=soft_delete)

    def check_storage_access(self, target: Location, staging_dir: Location) -> None:
        preflight.check_storage_access(target, staging_dir)

    def applied(self, written: Written[S]) -> S:
        return commit_metrics.applied(written)

    def read_record(self, target: Location, table: str) -> Recorded | None:
        return commit_record.read_record(target, table)

    def rows(self, target: Location, columns: Sequence[str] = ()) -> pa.Table | None:
        table = open_existing(target)
        return None if table is None else read_rows(table, columns)

    def read_history(
        self, target: Location, keys: Sequence[str], values: Sequence[str] = (), *, replay_from: int | None = None
    ) -> pa.Table:
        return history_rows.read_history(target, keys, values, replay_from=replay_from)

    def table_schema(self, target: Location) -> pa.Schema:
        return history_rows.table_schema(target)

    def current_rows(self, target: Location) -> int:
        return history_rows.current_rows(target)

    def discard(self, target: Location, *, held: Callable[[Sequence[str]], str]) -> Discarded | None:
        return discard.discard_target(target, held=held)

    def health(self, target: Location, thresholds: Thresholds) -> TargetHealth | None:
        return maintenance_facts.read_health(target, thresholds.small_file_bytes)

    def compact(self, spark: SparkSession, target: Location, thresholds: Thresholds) -> Compacted:
        return maintenance.compact(spark, target, thresholds)

    def vacuum(self, spark: SparkSession, target: Location, *, retain_hours: int) -> Vacuumed:
        return maintenance.vacuum(spark, target, retain_hours)

    def merge_on_read(self, spark: SparkSession, target: Location) -> bool:
        return maintenance.enable_deletion_vectors(spark, target)


DELTA: TargetFormat = DeltaFormat()
