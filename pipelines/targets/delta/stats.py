"""What the target looks like: its row count and column schema, read with deltalake.

Read outside Spark on purpose: the count and the schema come from the Delta log and the
Parquet footers (no data scan, no engine; a live-row count with soft delete reads the flag
column, and a table with deletion vectors subtracts the rows its deletion-vector files delete
from the log's counts), and an independent reader is what a check of the engine's output should use. The
target must be reachable from this process, which the engine already requires (see
:mod:`sharesync.pipelines.targets.delta.write`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.delta.rows import count_rows, has_deletion_vectors, hidden_rows, quoted
from sharesync.pipelines.targets.facts import TargetStats
from sharesync.pipelines.targets.guard_columns import DELETED_COLUMN
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["read_target_stats", "row_count"]


def read_target_stats(target: Location, *, soft_delete: bool = False) -> TargetStats | None:
    """Stats of the Delta table at ``target``; None when there is no table there (yet)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_target(target)
    except TableNotFoundError:
        return None
    schema = table.schema()
    columns = tuple((f.name, _type_name(f.type), bool(f.nullable)) for f in schema.fields)
    return TargetStats(table.version(), _count(table, live_only=soft_delete), columns)


def row_count(target: Location) -> int:
    """Rows in the current version of the Delta table at ``target``, soft-deleted ones included."""
    return _count(open_target(target), live_only=False)


def _count(table: DeltaTable, *, live_only: bool) -> int:
    """From the log's file statistics when they are complete (less the rows deletion vectors
    delete, counted from their files), else by a read; ``live_only`` leaves out soft-deleted rows,
    which takes a read of the flag column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if live_only:
        flag = quoted(DELETED_COLUMN)
        return count_rows(table, f"{flag} IS NULL OR NOT {flag}")  # NULL is live: only a delete sets it
    actions = pa.table(table.get_add_actions(flatten=True))
    if "num_records" in actions.column_names and actions["num_records"].null_count == 0:
        hidden = hidden_rows(table)[1] if has_deletion_vectors(table) else 0
        return int(pc.sum(actions["num_records"]).as_py() or 0) - hidden
    return count_rows(table)


def _type_name(delta_type: Any) -> str:
    """``long``, ``decimal(10,2)``; nested types by their kind (``struct``, ``array``, ``map``)."""
    primitive = getattr(delta_type, "type", None)
    if isinstance(primitive, str):
        return primitive
    return str(delta_type).split("(")[0].removesuffix("Type").lower() or "unknown"
