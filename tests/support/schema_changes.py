"""Provider schema changes written by ``deltalake``: a new column, a dropped one, a retyped one."""

from __future__ import annotations

import random

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.server.samples import sample_rows


def add_column(path: str, seed: int) -> None:
    """Append rows carrying a new ``note`` column, then update old rows to set it."""
    rows = sample_rows(random.Random(seed), [1000 + seed, 1001 + seed])
    rows = rows.append_column("note", pa.array(["fresh", None], pa.string()))
    write_deltalake(path, rows, mode="append", schema_mode="merge")
    DeltaTable(path).update(updates={"note": "'set'", "qty": "qty + 7"}, predicate="id <= 3")


def drop_column(path: str, column: str = "qty") -> None:
    current = read_rows(DeltaTable(path)).drop_columns([column])
    write_deltalake(path, current, mode="overwrite", schema_mode="overwrite", partition_by=None)


def retype_column(path: str, column: str = "small") -> None:
    """``column`` becomes a string (not a widening: breaking)."""
    current = read_rows(DeltaTable(path))
    index = current.schema.get_field_index(column)
    current = current.set_column(index, column, current[column].cast(pa.string()))
    write_deltalake(path, current, mode="overwrite", schema_mode="overwrite", partition_by=None)
