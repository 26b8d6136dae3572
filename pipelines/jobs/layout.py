"""What a target row looks like, and the steps every job shares.

Target columns are the projected data columns (in source order) plus sharesync's own:
``_sharesync_version`` (long: the source commit of the row's last change),
``_sharesync_commit_timestamp`` (timestamp of that commit) and, with soft delete,
``_sharesync_deleted`` (boolean). Append-mode targets keep the change-feed columns instead.

Counts come from the Delta commits' ``operationMetrics`` (recorded by Sail and by Delta Lake on
Apache Spark alike), so reporting what a job did costs no scan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.schema_evolution import check_schema, fields_of
from sharesync.pipelines.jobs.staged import CDF_COLUMNS, COMMIT_TIMESTAMP, COMMIT_VERSION
from sharesync.pipelines.jobs.target import Commit, TargetState, commit_metrics, quote_identifier
from sharesync.sync.core.errors import SchemaIncompatible, TargetError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["DELETED_COLUMN", "GUARD_COLUMNS", "TIMESTAMP_COLUMN", "VERSION_COLUMN", "ApplyStats"]

VERSION_COLUMN = "_sharesync_version"
TIMESTAMP_COLUMN = "_sharesync_commit_timestamp"
DELETED_COLUMN = "_sharesync_deleted"
GUARD_COLUMNS = (VERSION_COLUMN, TIMESTAMP_COLUMN, DELETED_COLUMN)


@dataclass(frozen=True)
class ApplyStats:
    """What one job did to the target, as shown to users.

    ``rows_in_batch``: change rows staged (before netting and filtering). ``inserted``,
    ``updated``, ``deleted``: target rows; a soft delete counts as deleted, a replace counts the
    rows it removed as deleted. ``target_version``: the target's Delta version afterwards, or
    ``None`` when there is no table (or an empty batch gave no reason to look).
    ``added_columns``: columns the target gained from an additive schema change.
    """

    rows_in_batch: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    target_version: int | None = None
    added_columns: tuple[str, ...] = ()

    @property
    def changed_rows(self) -> int:
        return self.inserted + self.updated + self.deleted


def session_of(spark: SparkSession | Callable[[], SparkSession]) -> SparkSession:
    """Jobs accept a session or a factory, so an empty batch never starts an engine."""
    return spark() if callable(spark) else spark


def col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quote_identifier(name))


def keeps(row_filter: Column | None) -> Column:
    """Only TRUE keeps a row; NULL (unknown) drops it, as in a SQL ``WHERE``."""
    from pyspark.sql import functions as F

    return F.lit(True) if row_filter is None else F.coalesce(row_filter, F.lit(False))


def guard_values(soft_delete: bool) -> list[Column]:
    """Guard columns for rows written straight from a batch (creation, bootstrap)."""
    from pyspark.sql import functions as F

    guards = [F.col(COMMIT_VERSION).cast("long").alias(VERSION_COLUMN), F.col(COMMIT_TIMESTAMP).alias(TIMESTAMP_COLUMN)]
    return [*guards, F.lit(False).alias(DELETED_COLUMN)] if soft_delete else guards


def projection(df: DataFrame, keys: Sequence[str], columns: Sequence[str] | None, target: str) -> list[str]:
    """The data columns to write, in source order; keys are always kept."""
    data = [c for c in df.columns if c not in CDF_COLUMNS and c not in GUARD_COLUMNS]
    by_lower = {c.lower(): c for c in data}
    wanted = [*keys, *(data if columns is None else columns)]
    missing = [c for c in wanted if c.lower() not in by_lower]
    if missing:
        raise SchemaIncompatible(
            f"target '{target}': the shared table has no column {', '.join(map(repr, missing))} named in "
            f"'keys'/'columns' (it has {', '.join(data)}); fix the config or ask the provider"
        )
    chosen = {by_lower[c.lower()] for c in wanted}
    return [c for c in data if c in chosen]


def require_columns(state: TargetState, needed: Sequence[str], mode: str) -> None:
    """A target sharesync did not write (or wrote in another mode) is refused, not mangled."""
    missing = [c for c in needed if c not in state.column_names]
    if missing:
        raise TargetError(
            f"target '{state.path}' is a Delta table without {', '.join(missing)}, so it was not written by "
            f"sharesync in '{mode}' mode; point 'target' at a new path, or run 'sharesync reset' for this table to rebuild it"
        )


def added_columns(
    df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
) -> tuple[str, ...]:
    """Columns the target must gain; raises SchemaIncompatible on a breaking change."""
    source = fields_of(df.select(*[col(c) for c in data_columns]).schema.jsonValue())
    target = fields_of(state.schema or {}, exclude=exclude)
    return check_schema(target, source, where=f"target '{state.path}'").added_names


def create_target(out: DataFrame, target: str, rows: int) -> ApplyStats:
    """The first write creates the table; the default save mode fails if one appeared meanwhile."""
    out.write.format("delta").save(target)
    commits = commit_metrics(target, None)
    return ApplyStats(rows, total(commits, WRITES, "numOutputRows"), 0, 0, version_after(None, commits))


# A DataFrame save is "WRITE" on Delta Lake/Spark; Sail calls the one that creates a table "CREATE TABLE".
WRITES = ("WRITE", "CREATE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE")


def total(commits: Sequence[Commit], operations: str | Sequence[str], metric: str) -> int:
    """Sum one ``operationMetrics`` entry over the commits of the given operation(s)."""
    ops = (operations,) if isinstance(operations, str) else tuple(operations)
    return sum(int(c.metrics.get(metric) or 0) for c in commits if c.operation in ops)


def version_after(before: int | None, commits: Sequence[Commit]) -> int | None:
    """The target's version after a job: its last commit, or unchanged if it made none."""
    return commits[-1].version if commits else before


def row_count(target: str) -> int:
    """Rows in the target's current version: from the Delta log's file statistics, or, for
    files written without statistics, from the parquet footers (never a data scan)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(target)
    actions = pa.table(table.get_add_actions(flatten=True))
    if "num_records" in actions.column_names and actions["num_records"].null_count == 0:
        return int(pc.sum(actions["num_records"]).as_py() or 0)
    return int(table.to_pyarrow_dataset().count_rows())
