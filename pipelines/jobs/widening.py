"""Widen target columns whose type the provider widened (Delta type widening), before a batch writes.

The engine has no ``ALTER TABLE``, and an append or MERGE of a wider column into a narrower
one casts the values *down* to the target's type (pysail 0.7.2: a long of 5e9 into an ``int``
column fails, a ``timestamp_ntz`` into a ``date`` column would lose its time of day). So a widened
column is never left to the write: the target is rewritten first, in one ``overwrite`` commit
holding every row and column as they were, the widened columns cast up. The rows do not change,
so a failure after the rewrite leaves a target that is only wider, and the retry finds nothing
left to widen. A column becoming ``timestamp_ntz`` needs the ``timestampNtz`` table feature,
which the engine will not add on an overwrite ("Table features must be specified"): ``deltalake``
adds it first, in a protocol-only commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import col
from sharesync.pipelines.targets.delta.write import schema_change
from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.delta.preflight import TargetState, inspect_target
from sharesync.sync.core.errors import SchemaIncompatible
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["widen_target"]

_NTZ_FEATURE = "timestampNtz"


def widen_target(
    session: SparkSession, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
) -> tuple[TargetState, tuple[str, ...]]:
    """The target after widening the columns the batch ``df`` holds wider; and their names."""
    widened = dict(schema_change(df, state, data_columns, exclude=exclude).widened)
    if not state.exists or not widened:
        return state, ()
    if "timestamp_ntz" in widened.values():
        _add_ntz_feature(state.location)
    table = session.read.format("delta").load(state.path)
    out = table.select(*[col(c).cast(widened[c]).alias(c) if c in widened else col(c) for c in table.columns])
    try:
        out.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(state.path)
    except Exception as exc:  # noqa: BLE001 - the engine's own error, translated with the fix
        raise SchemaIncompatible(
            f"could not widen column(s) {sorted(widened)} of target '{state.path}' to the provider's wider types; "
            f"nothing else was written. Run 'sharesync reset' for this table to re-bootstrap it. Engine said: {exc}"
        ) from None
    return inspect_target(state.location), tuple(widened)


def _add_ntz_feature(target: Location) -> None:
    from deltalake import TableFeatures

    table = open_target(target)
    if _NTZ_FEATURE not in (table.protocol().reader_features or []):
        table.alter.add_feature(TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True)
