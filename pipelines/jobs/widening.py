"""Widen target columns whose type the provider widened (Delta type widening), before a batch writes.

The engine has no ``ALTER TABLE``, and an append or MERGE of a wider column into a narrower
one casts the values *down* to the target's type (pysail 0.7.2: a long of 5e9 into an ``int``
column fails, a ``timestamp_ntz`` into a ``date`` column would lose its time of day). So a widened
column is never left to the write: the target is rewritten first, in one ``overwrite`` commit
holding every row and column as they were, the widened columns cast up. The rows do not change,
so a failure after the rewrite leaves a target that is only wider, and the retry finds nothing
left to widen. A column becoming ``timestamp_ntz`` needs the ``timestampNtz`` table feature,
which the engine will not add on an overwrite: the format's writer adds it first
(:meth:`~sharesync.pipelines.targets.port.TargetWriter.allow_types`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import col
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.core.errors import SchemaIncompatible

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["widen_target"]


def widen_target(
    session: SparkSession, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
) -> tuple[TargetState, tuple[str, ...]]:
    """The target after widening the columns the batch ``df`` holds wider; and their names."""
    widened = dict(WRITER.schema_change(df, state, data_columns, exclude=exclude).widened)
    if not state.exists or not widened:
        return state, ()
    WRITER.allow_types(state.location, widened.values())
    table = WRITER.read(session, state.location)
    out = table.select(*[col(c).cast(widened[c]).alias(c) if c in widened else col(c) for c in table.columns])
    try:
        WRITER.save(out, state.location, mode="overwrite", schema="replace")
    except Exception as exc:  # noqa: BLE001 - the engine's own error, translated with the fix
        raise SchemaIncompatible(
            f"could not widen column(s) {sorted(widened)} of target '{state.path}' to the provider's wider types; "
            f"nothing else was written. Run 'sharesync reset' for this table to re-bootstrap it. Engine said: {exc}"
        ) from None
    return WRITER.state(state.location), tuple(widened)
