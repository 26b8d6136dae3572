"""The target-format port: everything sharesync does to a target, as one object.

The run, the CLI and Dagster reach a target only through a :class:`TargetFormat` (today the one
implementation, :data:`sharesync.pipelines.targets.delta.format.DELTA`); the Spark jobs only
through its :class:`TargetWriter`. A job returns what it committed
(:class:`~sharesync.pipelines.targets.facts.Written`), never what that did: the run asks the
format (:meth:`TargetFormat.applied`), which reads its own commits' numbers (Delta:
``commitInfo.operationMetrics``). The values both sides exchange are format-neutral
(:mod:`sharesync.pipelines.targets.facts`, :mod:`~sharesync.pipelines.targets.state`).

Maintenance (compaction, vacuum; issue 42) is here too: :meth:`TargetFormat.health` reads the
target's shape from its log, the pure rule (:mod:`sharesync.pipelines.targets.health`) says when to
compact, :meth:`TargetFormat.compact` and :meth:`TargetFormat.vacuum` do it with the engine, the
caller holding the table's lease and fence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, Protocol

from sharesync.pipelines.targets.facts import ApplyStats, S, Written

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from sharesync.pipelines.targets.facts import Discarded, Glance, TargetIdentity, TargetStats
    from sharesync.pipelines.targets.health import Compacted, TargetHealth, Thresholds, Vacuumed
    from sharesync.pipelines.targets.record import Recorded
    from sharesync.pipelines.targets.schema_evolution import SchemaChange
    from sharesync.pipelines.targets.state import TargetState
    from sharesync.sync.core.location import Location
    from sharesync.sync.core.storage import StorageSection
    from sharesync.sync.planning.key_ranges import FileRanges

__all__ = ["SaveMode", "SchemaMode", "TargetFormat", "TargetWriter"]

SaveMode = Literal["append", "overwrite"]
# keep: the table's schema must hold the rows; merge: add their new columns; replace: take theirs.
SchemaMode = Literal["keep", "merge", "replace"]


class TargetWriter(Protocol):
    """What a Spark job does to a target: read it before writing, write it, evolve its schema."""

    def state(self, target: Location) -> TargetState:
        """The target as it is before the write; TargetError when it cannot be one of this format."""
        ...

    def rows(self, target: Location) -> int:
        """All rows of the existing table (soft-deleted ones included)."""
        ...

    def key_ranges(self, target: Location, columns: Sequence[str]) -> list[FileRanges]:
        """Per data file of the current version, its (min, max) statistics of ``columns``."""
        ...

    def read(self, spark: SparkSession, target: Location) -> DataFrame: ...

    def save(
        self, df: DataFrame, target: Location, *, mode: SaveMode, schema: SchemaMode = "keep", record: str | None = None
    ) -> None:
        """One commit of ``df``; ``record`` (:meth:`CommitRecord.encode`) rides in it."""
        ...

    def create(
        self, df: DataFrame, target: Location, *, rows: int, record: str | None = None, deletion_vectors: bool = True
    ) -> Written[ApplyStats]:
        """The first write, which creates the table (and fails if one appeared meanwhile); merge-on-read
        (deletion vectors) unless ``deletion_vectors`` is False."""
        ...

    def register(self, spark: SparkSession, target: Location) -> str:
        """A catalog name for the table, for MERGE and DELETE statements."""
        ...

    def schema_change(
        self, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
    ) -> SchemaChange: ...

    def added_columns(
        self, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
    ) -> tuple[str, ...]: ...

    def allow_types(self, target: Location, types: Iterable[str]) -> None:
        """Let the table hold these (Spark DDL) types before a write widens a column to one."""
        ...


class TargetFormat(Protocol):
    """Everything the run, the CLI and Dagster do to a target of one format."""

    @property
    def writer(self) -> TargetWriter: ...

    # glance and identity: is the target still the one the checkpoint describes?
    def glance(self, target: str, version: int, checkpoint_written: datetime | None, storage: StorageSection) -> Glance:
        """Cheap: whether ``version`` is still the newest commit (imports nothing for a local target)."""
        ...

    def identity(self, target: Location, *, since: int | None = None) -> TargetIdentity | None: ...

    def high_water_mark(self, target: Location, *columns: str) -> int | None: ...

    def history_start(self, target: Location) -> int | None: ...

    # inspect and preflight
    def inspect(self, target: Location) -> TargetState: ...

    def stats(self, target: Location, *, soft_delete: bool = False) -> TargetStats | None: ...

    def check_storage_access(self, target: Location, staging_dir: Location) -> None: ...

    # what a job committed, and the record it left
    def applied(self, written: Written[S]) -> S: ...

    def read_record(self, target: Location, table: str) -> Recorded | None: ...

    # rows for checks (verify, Dagster checks) and history planning, read outside Spark
    def rows(self, target: Location, columns: Sequence[str] = ()) -> pa.Table | None:
        """The table's current live rows (``columns`` of them; all when none are named), deletion
        vectors honoured; None when there is no table."""
        ...

    def read_history(
        self, target: Location, keys: Sequence[str], values: Sequence[str] = (), *, replay_from: int | None = None
    ) -> pa.Table: ...

    def table_schema(self, target: Location) -> pa.Schema: ...

    def current_rows(self, target: Location) -> int: ...

    # removal on request
    def discard(self, target: Location, *, held: Callable[[Sequence[str]], str]) -> Discarded | None:
        """Remove the table sharesync wrote there; ``held`` names what a table of these columns holds."""
        ...

    # maintenance, under the table's lease and fence
    def health(self, target: Location, thresholds: Thresholds) -> TargetHealth | None:
        """The target's files, size, rows and deletion vectors from its log; None when there is no table."""
        ...

    def compact(self, spark: SparkSession, target: Location, thresholds: Thresholds) -> Compacted:
        """Fold small files and deletion vectors into well-sized files; the rows stay the same."""
        ...

    def vacuum(self, spark: SparkSession, target: Location, *, retain_hours: int) -> Vacuumed:
        """Remove the files no version of the last ``retain_hours`` needs."""
        ...

    def merge_on_read(self, spark: SparkSession, target: Location) -> bool:
        """Turn an existing target's deletion vectors on; False when they were on already."""
        ...
