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
    import pyarrow.dataset as ds

    dataset = open_target(target).to_pyarrow_dataset()
    narrow = [*keys, VALID_FROM_VERSION, VALID_TO_VERSION, IS_CURRENT]
    if not values:
        return dataset.to_table(columns=narrow)
    compared = ds.field(IS_CURRENT)
    if replay_from is not None:
        compared = compared | (ds.field(VALID_TO_VERSION) >= replay_from)
    with_values = dataset.to_table(columns=[*narrow, *values], filter=compared)
    others = dataset.to_table(columns=narrow, filter=~compared)
    return pa.concat_tables([with_values, others], promote_options="default")


def table_schema(target: Location) -> pa.Schema:
    return open_target(target).to_pyarrow_dataset().schema


def current_rows(target: Location) -> int:
    """Rows with ``_sharesync_is_current``: what the source's ``numRecords`` should equal."""
    import pyarrow.dataset as ds

    return int(open_target(target).to_pyarrow_dataset().count_rows(filter=ds.field(IS_CURRENT)))


def history_start(target: Location) -> int | None:
    """The oldest version a row of ``target`` is valid from (None: no table, or no rows)."""
    import pyarrow.compute as pc
    from deltalake.exceptions import TableNotFoundError

    try:
        dataset = open_target(target).to_pyarrow_dataset()
    except TableNotFoundError:
        return None
    if VALID_FROM_VERSION not in dataset.schema.names:
        return None
    oldest = pc.min(dataset.to_table(columns=[VALID_FROM_VERSION])[VALID_FROM_VERSION]).as_py()
    return None if oldest is None else int(oldest)
