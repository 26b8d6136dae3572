"""A rebuild's first step in append and history mode: the target's rows moved into the provider's new schema.

``on_breaking_change: rebuild`` re-bootstraps a table whose provider dropped, renamed or retyped a
column. Merge and snapshot targets mirror the provider, so the snapshot simply replaces them. An
append target's change log and a history target's closed rows exist nowhere else, so they are
kept: this job rewrites them, in one ``overwrite`` commit, into the new schema — a column the
provider dropped (or renamed away) is removed, a column whose type changed other than by widening
holds NULL in the rows from before (a cast could fail or silently change values) — and the
snapshot is then written on top as after a history gap. The target version before the rebuild
still holds the old values (Delta time travel). A crash between the two commits leaves a target
that is only re-shaped; the checkpoint did not move, so the retry applies the same versions to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import col
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.schema_evolution import compare_schema, fields_of
from sharesync.pipelines.targets.state import TargetState

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["conform_target"]


def conform_target(
    session: SparkSession, df: DataFrame, state: TargetState, data_columns: Sequence[str], *, exclude: Sequence[str]
) -> TargetState:
    """The target after moving its rows into the schema of the batch ``df`` (unchanged when it fits)."""
    from pyspark.sql import functions as F

    if not state.exists:
        return state
    batch = df.select(*[col(c) for c in data_columns]).schema
    diff = compare_schema(fields_of(state.schema or {}, exclude=exclude), fields_of(batch.jsonValue()))
    if not diff.problems:
        return state
    dropped = {name.lower() for name in diff.dropped}
    retyped = {name.lower() for name, _, _ in diff.changed}
    # As DDL type names: a Spark Connect cast to pyspark's StringType() makes Apache Spark 4.2 write
    # the type as 'string collate UTF8_BINARY', which deltalake (and so every check here) cannot read.
    types = {field.name.lower(): field.dataType.simpleString() for field in batch.fields}
    table = WRITER.read(session, state.location)
    out = table.select(
        *[
            F.lit(None).cast(types[name.lower()]).alias(name) if name.lower() in retyped else col(name)
            for name in table.columns
            if name.lower() not in dropped
        ]
    )
    WRITER.save(out, state.location, mode="overwrite", schema="replace")
    return WRITER.state(state.location)
