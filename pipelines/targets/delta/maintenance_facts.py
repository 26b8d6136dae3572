"""A Delta target's health (:class:`~sharesync.pipelines.targets.health.TargetHealth`) from its log, with ``deltalake``.

Files, sizes and row counts are the add actions' own numbers. ``deltalake`` (1.6) does not show
an add's ``deletionVector.cardinality``, so the hidden rows are counted from the
deletion-vector files (:func:`~sharesync.pipelines.targets.delta.rows.hidden_rows`), never the data. The last compaction is the newest commit in
:data:`LOOK_BACK` that was one: Delta's ``OPTIMIZE`` or ``REORG`` (Apache Spark), or a rewrite
carrying :data:`COMPACTION_MARKER` (the engines without them, Sail).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.open import open_existing
from sharesync.pipelines.targets.delta.rows import hidden_rows
from sharesync.pipelines.targets.health import TargetHealth

if TYPE_CHECKING:
    from deltalake import DeltaTable

    from sharesync.sync.core.location import Location

__all__ = ["COMPACTION_MARKER", "LOOK_BACK", "read_health"]

# The userMetadata of sharesync's own compaction rewrite (never a CommitRecord: it applies nothing).
COMPACTION_MARKER = json.dumps({"sharesync-maintenance": "compaction"})
_COMPACTIONS = frozenset({"OPTIMIZE", "REORG"})
LOOK_BACK = 100  # commits looked through for the last compaction


def read_health(target: Location, small_file_bytes: int) -> TargetHealth | None:
    """The health of the Delta table at ``target``; None when there is none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = open_existing(target)
    if table is None:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    sizes = actions.column("size_bytes")
    records = actions.column("num_records") if "num_records" in actions.column_names else pa.array([], pa.int64())
    files_with_vectors, hidden = hidden_rows(table)
    return TargetHealth(
        version=table.version(),
        files=actions.num_rows,
        bytes=int(pc.sum(sizes).as_py() or 0),
        small_files=int(pc.sum(pc.less(sizes, small_file_bytes)).as_py() or 0),
        rows=int(pc.sum(records).as_py() or 0),
        deleted_rows=hidden,
        files_with_deletion_vectors=files_with_vectors,
        last_compaction=_last_compaction(table),
    )


def _last_compaction(table: DeltaTable) -> datetime | None:
    for commit in table.history(LOOK_BACK):  # newest first
        if commit.get("operation") in _COMPACTIONS or commit.get("userMetadata") == COMPACTION_MARKER:
            return datetime.fromtimestamp(int(commit["timestamp"]) / 1000, UTC)
    return None
