"""A history-mode target as its planning and its checks read it: with deltalake, outside Spark.

Planning needs every row's keys and validity (a key's watermark counts its closed rows too),
and, with a tracked-column list, the other values of the open rows (and of those a backfill
reopens) only. These are narrow columnar reads of the table's files; the target must be
reachable from this process, as for every job (:mod:`sharesync.pipelines.targets.delta.write`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.delta.rows import count_rows, quoted, read_rows
from sharesync.sync.core.history_columns import IS_CURRENT, VALID_FROM_VERSION, VALID_TO_VERSION
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["current_rows", "history_start", "read_history", "table_schema"]


def read_history(
    target: Location, keys: Sequence[str], values: Sequence[str] = (), *, replay_from: int | None = None
) -> pa.Table:
    """Keys, valid-from/to versions and the current flag of every row; ``values`` of the open rows,
    and of the rows a backfill from ``replay_from`` reopens (closed at or after it): the replayed
    changes are compared with their images."""
    import pyarrow as pa

    table = open_target(target)
    narrow = [*keys, VALID_FROM_VERSION, VALID_TO_VERSION, IS_CURRENT]
    if not values:
        return read_rows(table, narrow)
    compared = f"{quoted(IS_CURRENT)}"
    if replay_from is not None:
        compared += f" OR {quoted(VALID_TO_VERSION)} >= {int(replay_from)}"
    with_values = read_rows(table, [*narrow, *values], f"({compared}) IS TRUE")
    others = read_rows(table, narrow, f"({compared}) IS NOT TRUE")
    return pa.concat_tables([with_values, others], promote_options="default")


def table_schema(target: Location) -> pa.Schema:
    return read_rows(target, where="false").schema


def current_rows(target: Location) -> int:
    """Rows with ``_sharesync_is_current``: what the source's ``numRecords`` should equal."""
    return count_rows(target, quoted(IS_CURRENT))


def history_start(target: Location) -> int | None:
    """The oldest version a row of ``target`` is valid from (None: no table, or no rows)."""
    import pyarrow.compute as pc
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_target(target)
    except TableNotFoundError:
        return None
    if VALID_FROM_VERSION not in {f.name for f in table.schema().fields}:
        return None
    oldest = pc.min(read_rows(table, [VALID_FROM_VERSION])[VALID_FROM_VERSION]).as_py()
    return None if oldest is None else int(oldest)
