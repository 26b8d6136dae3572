"""What the target looks like after a sync: live row count and column schema, read with deltalake.

Read outside Spark on purpose: the count and the schema come from the Delta log and the
Parquet footers (no data scan, no engine), and an independent reader is what a check of
the engine's output should use. The target must be reachable from this process, which the
engine already requires (see :mod:`sharesync.pipelines.jobs.target`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sharesync.pipelines.jobs.layout import DELETED_COLUMN


@dataclass(frozen=True)
class TargetStats:
    version: int
    rows: int  # live rows: soft-deleted ones are not counted
    columns: tuple[tuple[str, str, bool], ...]  # (name, type, nullable)


def read_target_stats(path: str, *, soft_delete: bool = False) -> TargetStats | None:
    """Stats of the Delta table at ``path``; None when there is no table there (yet)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(path)
    except TableNotFoundError:
        return None
    dataset = table.to_pyarrow_dataset()
    rows = dataset.count_rows(filter=_live_rows() if soft_delete else None)
    schema = table.schema()
    columns = tuple((f.name, _type_name(f.type), bool(f.nullable)) for f in schema.fields)
    return TargetStats(table.version(), rows, columns)


def _live_rows() -> Any:
    import pyarrow.dataset as ds

    flag = ds.field(DELETED_COLUMN)
    return flag.is_null() | ~flag  # NULL counts as live: the flag is only set by a delete


def _type_name(delta_type: Any) -> str:
    """``long``, ``decimal(10,2)``; nested types by their kind (``struct``, ``array``, ``map``)."""
    primitive = getattr(delta_type, "type", None)
    if isinstance(primitive, str):
        return primitive
    return str(delta_type).split("(")[0].removesuffix("Type").lower() or "unknown"
