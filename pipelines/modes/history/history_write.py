"""Write a history plan to its target in one Delta commit: a MERGE, or a copy-on-write rewrite.

The plan (:mod:`sharesync.sync.planning.history_plan`) names each target row it changes by its
keys and ``_sharesync_valid_from_version`` (unique per key: one event per key and version), so
one MERGE on that pair applies it — the classic SCD2 merge: rows to open carry a NULL match
version, match nothing and are inserted; rows to close or update in place match their row;
rows a backfill rewrites are deleted. When the plan touches a large share of the target, the
rewrite writes the same table in one ``overwrite`` commit (see
:mod:`sharesync.pipelines.modes.merge.rewrite` for why that is cheaper on Sail). Both use only the
Spark Connect surface the other jobs use, and the target's reading side stays with the plan:
nothing here decides what is already applied.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.column_add import add_empty_columns
from sharesync.pipelines.jobs.columns import (
    HISTORY_COLUMNS,
    IS_CURRENT,
    VALID_FROM_VERSION,
    VALID_TO,
    VALID_TO_VERSION,
    col,
    quote_identifier,
)
from sharesync.pipelines.targets.delta.fencing import fenced_dml
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.core.location import Location
from sharesync.sync.planning.history_plan import ACTION, MATCH_VERSION, SET_VALUES, Action

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["evolve_history", "merge_plan", "rewrite_plan", "written_columns"]

_VALIDITY = (VALID_TO_VERSION, VALID_TO, IS_CURRENT)  # what closing or reopening a row changes


def written_columns(plan: DataFrame, data_columns: Sequence[str]) -> DataFrame:
    """The plan's rows to open as target rows: a new table, or a bootstrap that replaces one."""
    from pyspark.sql import functions as F

    return plan.where(F.col(ACTION) == F.lit(Action.INSERT)).select(
        *[col(c) for c in (*data_columns, *HISTORY_COLUMNS)]
    )


def merge_plan(
    plan: DataFrame,
    name: str,
    keys: Sequence[str],
    data_columns: Sequence[str],
    null_keys: bool,
    within: Column | None = None,
) -> None:
    """One MERGE of the plan into the registered target ``name`` on (keys, valid-from version);
    ``within``: the actions' key bounds on the target, so the engine can skip files by them."""
    from pyspark.sql import functions as F

    def s(c: str) -> Column:
        return F.col(f"s.{quote_identifier(c)}")

    def t(c: str) -> Column:
        return F.col(f"{name}.{quote_identifier(c)}")

    on = _keys_equal([t(k) for k in keys], [s(k) for k in keys], null_keys) & (
        t(VALID_FROM_VERSION) == s(MATCH_VERSION)
    )
    on = on if within is None else on & within
    action = s(ACTION)
    validity = {quote_identifier(c): s(c) for c in _VALIDITY}
    values = {quote_identifier(c): s(c) for c in data_columns if c not in keys}
    row = {quote_identifier(c): s(c) for c in (*data_columns, *HISTORY_COLUMNS)}
    writer = plan.alias("s").mergeInto(name, on)
    writer = writer.whenMatched(action == F.lit(Action.DELETE)).delete()
    if values:
        writer = writer.whenMatched((action == F.lit(Action.UPDATE)) & s(SET_VALUES)).update({**values, **validity})
    writer = writer.whenMatched(action == F.lit(Action.UPDATE)).update(validity)
    with fenced_dml(plan.sparkSession):
        writer.whenNotMatched(action == F.lit(Action.INSERT)).insert(row).merge()


def rewrite_plan(
    spark: SparkSession,
    plan: DataFrame,
    target: Location,
    keys: Sequence[str],
    data_columns: Sequence[str],
    null_keys: bool,
    record: str | None = None,
) -> None:
    """The target after the plan, written with one ``overwrite``: every row joined with the plan's
    action for it (one at most) — kept, updated or dropped — then the new rows. One outer join
    (not an anti join plus an inner join) reads the target once: less time and memory on Sail."""
    from pyspark.sql import functions as F

    table = WRITER.read(spark, target)
    types = {f.name: f.dataType for f in table.schema.fields}
    values = [c for c in data_columns if c not in keys]
    alias = {c: f"__ss_c{i}" for i, c in enumerate([*keys, *values, *_VALIDITY, MATCH_VERSION, ACTION, SET_VALUES])}
    action = F.col(alias[ACTION])
    acts = plan.select(*[col(c).alias(a) for c, a in alias.items()]).where(action != F.lit(Action.INSERT))
    on = _keys_equal([table[quote_identifier(k)] for k in keys], [F.col(alias[k]) for k in keys], null_keys)
    on = on & (table[quote_identifier(VALID_FROM_VERSION)] == F.col(alias[MATCH_VERSION]))
    joined = table.join(acts, on, "left").where(F.coalesce(action != F.lit(Action.DELETE), F.lit(True)))
    updated = action == F.lit(Action.UPDATE)  # NULL (no action): the row stays as it is

    def after(c: str) -> Column:
        if c in _VALIDITY:
            return F.when(updated, F.col(alias[c]).cast(types[c])).otherwise(col(c)).alias(c)
        if c in values:
            return F.when(updated & F.col(alias[SET_VALUES]), F.col(alias[c]).cast(types[c])).otherwise(col(c)).alias(c)
        return col(c)

    inserted = written_columns(plan, data_columns).select(*[col(c).cast(types[c]).alias(c) for c in table.columns])
    out = joined.select(*[after(c) for c in table.columns]).unionByName(inserted)
    WRITER.save(out, target, mode="overwrite", record=record)


def evolve_history(df: DataFrame, state: TargetState, data_columns: Sequence[str]) -> tuple[str, ...]:
    """Add the batch's new columns before the write, as merge mode does (:func:`add_empty_columns`)."""
    added = WRITER.added_columns(df, state, data_columns, exclude=HISTORY_COLUMNS)
    if added:
        add_empty_columns(df, state, [col(c) for c in added], added)
    return added


def _keys_equal(left: Sequence[Column], right: Sequence[Column], null_safe: bool) -> Column:
    """Key equality; NULL-safe only when a key is NULL (plain ``=`` is cheaper, as in merge mode)."""
    pairs = [a.eqNullSafe(b) if null_safe else a == b for a, b in zip(left, right, strict=True)]
    return reduce(lambda a, b: a & b, pairs)
