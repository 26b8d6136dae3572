"""The Delta target as the Spark jobs write it: the format's :class:`~sharesync.pipelines.targets.port.TargetWriter`.

The one place a job's write spells ``format("delta")`` and Delta's table properties, and so the one
place a DataFrame write takes its stale-writer fencing number (:func:`~sharesync.pipelines.targets.delta.fencing.fenced`). The checks
before any write read with ``deltalake`` alone (:mod:`sharesync.pipelines.targets.delta.preflight`);
a breaking schema change is refused here with :class:`SchemaIncompatible` before anything is written.

Registration: Sail's ``DataFrame.mergeInto`` needs a catalog table name (a ``delta.`/path```
identifier is rejected), so before a MERGE or DELETE the target is registered as an external
table ``sharesync_<hash of path>`` (``CREATE TABLE IF NOT EXISTS``: idempotent, cheap) — a
stable, collision-free name that is safe to interpolate into SQL. On a Spark with a persistent
metastore the registration stays there; dropping it never deletes the data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.fencing import fenced
from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.delta.preflight import inspect_target
from sharesync.pipelines.targets.delta.stats import row_count
from sharesync.pipelines.targets.facts import ApplyStats, Tally, Written
from sharesync.pipelines.targets.port import SaveMode, SchemaMode, TargetWriter
from sharesync.pipelines.targets.schema_evolution import SchemaChange, check_schema, fields_of
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.core.errors import SchemaIncompatible
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
    from pyspark.sql.types import DataType, StructType

    from sharesync.sync.planning.key_ranges import FileRanges

__all__ = ["WRITER", "DeltaWriter", "recorded"]


# Sail 0.7 takes a column whose file statistics say min == max with no NULLs for a constant,
# but its writer (like pyarrow's) leaves NaN out of a float column's min and max: a file holding
# [NaN, 2.0] reads back as [2.0, 2.0], and a MERGE or rewrite then writes that back. Targets
# keep statistics only for their leading columns up to the first one holding a float or double,
# so no read of them can go wrong that way. A count, not a list of names
# (``delta.dataSkippingStatsColumns``): Delta Lake on Spark keeps a table's properties when an
# overwrite replaces its schema and then refuses a list naming a column the new schema lacks, and
# refuses boolean or binary columns in the list; Sail honours the count as Spark does.
INDEXED_COLUMNS_PROPERTY = "delta.dataSkippingNumIndexedCols"
DELETION_VECTORS_PROPERTY = "delta.enableDeletionVectors"
# Delta's own default: statistics cost time on every write of a wide table.
MAX_INDEXED_COLUMNS = 32
_NTZ_FEATURE = "timestampNtz"


class DeltaWriter:
    """The Delta :class:`~sharesync.pipelines.targets.port.TargetWriter` (stateless: one per process)."""

    def state(self, target: Location) -> TargetState:
        return inspect_target(target)

    def rows(self, target: Location) -> int:
        return row_count(target)

    def key_ranges(self, target: Location, columns: Sequence[str]) -> list[FileRanges]:
        """From the log's file statistics (no data read); a column they leave out is ``None``."""
        import pyarrow as pa

        actions = pa.table(open_target(target).get_add_actions(flatten=True))
        files: list[dict[str, tuple[object, object] | None]] = [{} for _ in range(actions.num_rows)]
        for column in columns:
            low, high = f"min.{column}", f"max.{column}"
            stated = low in actions.column_names and high in actions.column_names
            lows = actions[low].to_pylist() if stated else [None] * actions.num_rows
            highs = actions[high].to_pylist() if stated else [None] * actions.num_rows
            for file, least, most in zip(files, lows, highs, strict=True):
                file[column] = None if least is None or most is None else (least, most)
        return list(files)

    def read(self, spark: SparkSession, target: Location) -> DataFrame:
        return spark.read.format("delta").load(target.uri)

    def save(
        self, df: DataFrame, target: Location, *, mode: SaveMode, schema: SchemaMode = "keep", record: str | None = None
    ) -> None:
        writer = recorded(df.write.format("delta").mode(mode), record)
        if schema != "keep":
            writer = writer.option("overwriteSchema" if schema == "replace" else "mergeSchema", "true")
        fenced(writer).save(target.uri)

    def create(
        self, df: DataFrame, target: Location, *, rows: int, record: str | None = None, deletion_vectors: bool = True
    ) -> Written[ApplyStats]:
        """The first write creates the table; the default save mode fails if one appeared meanwhile.

        ``deletion_vectors`` is set explicitly either way, whatever the engine's defaults: with them
        a MERGE, DELETE or UPDATE marks the rows it replaces instead of copying the rest of their
        files (merge-on-read; both engines), without them the table stays readable by readers
        that cannot read DVs (docs/configuration.md, ``deletion_vectors``).
        """
        enabled = "true" if deletion_vectors else "false"
        writer = recorded(df.write.format("delta").option(DELETION_VECTORS_PROPERTY, enabled), record)
        fenced(writer.option(INDEXED_COLUMNS_PROPERTY, str(_indexed_columns(df.schema)))).save(target.uri)
        return Written(ApplyStats(rows), target, None, Tally.WRITTEN)

    def register(self, spark: SparkSession, target: Location) -> str:
        """Register the existing Delta table at ``target`` in the session catalog; return its name."""
        name = _table_name(target.uri)
        spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING delta LOCATION {_sql_string(target.uri)}")
        return name

    def schema_change(
        self, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
    ) -> SchemaChange:
        """What the target must gain or widen to hold the batch; raises SchemaIncompatible on a breaking change."""
        from pyspark.sql import functions as F

        quoted = [F.col("`" + c.replace("`", "``") + "`") for c in data_columns]
        source = fields_of(df.select(*quoted).schema.jsonValue())
        target = fields_of(state.schema or {}, exclude=exclude)
        return check_schema(target, source, where=f"target '{state.path}'")

    def added_columns(
        self, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
    ) -> tuple[str, ...]:
        """Columns the target must gain; raises SchemaIncompatible on a breaking change.

        Called after :func:`~sharesync.pipelines.jobs.widening.widen_target`: a column still narrower
        than the batch's here would be cast down by the write (the engine does), so it stops the job.
        """
        change = self.schema_change(df, state, data_columns, exclude=exclude)
        if change.widened:
            raise SchemaIncompatible(
                f"target '{state.path}': column(s) {[name for name, _ in change.widened]} are narrower than the "
                "provider's and would be cast down; nothing was written (the target is widened before any write, "
                "so this is a sharesync bug: please report it)"
            )
        return change.added_names

    def allow_types(self, target: Location, types: Iterable[str]) -> None:
        """A column becoming ``timestamp_ntz`` needs the ``timestampNtz`` table feature, which the
        engine will not add on an overwrite ("Table features must be specified"): ``deltalake``
        adds it first, in a protocol-only commit."""
        if "timestamp_ntz" not in types:
            return
        from deltalake import TableFeatures

        table = open_target(target)
        if _NTZ_FEATURE not in (table.protocol().reader_features or []):
            table.alter.add_feature(TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True)


WRITER: TargetWriter = DeltaWriter()


def recorded(writer: DataFrameWriter, record: str | None) -> DataFrameWriter:
    """``writer`` with the batch's record (:mod:`sharesync.pipelines.targets.delta.commit_record`) as the
    commit's ``userMetadata``: the one way both engines write it atomically with the data (Sail
    0.7.2 honours the write option only — not the session conf, nor on MERGE or DELETE)."""
    return writer if record is None else writer.option("userMetadata", record)


def _indexed_columns(schema: StructType) -> int:
    """The ``delta.dataSkippingNumIndexedCols`` of a new target: its leading columns up to the
    first that holds a float or double (at most Delta's default of 32)."""
    leading = 0
    for field in schema.fields:
        if _floating(field.dataType):
            break
        leading += 1
    return min(leading, MAX_INDEXED_COLUMNS)


def _floating(kind: DataType) -> bool:
    from pyspark.sql.types import ArrayType, DoubleType, FloatType, MapType, StructType

    if isinstance(kind, FloatType | DoubleType):
        return True
    if isinstance(kind, StructType):
        return any(_floating(f.dataType) for f in kind.fields)
    if isinstance(kind, ArrayType):
        return _floating(kind.elementType)
    if isinstance(kind, MapType):
        return _floating(kind.keyType) or _floating(kind.valueType)
    return False


def _table_name(path: str) -> str:
    """A stable identifier for ``path``: safe in SQL without quoting, unique per path."""
    digest = hashlib.sha256(path.rstrip("/").encode()).hexdigest()[:20]
    return f"sharesync_{digest}"


def _sql_string(value: str) -> str:
    """A Spark SQL string literal (backslash escapes are on by default in Spark and Sail)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
