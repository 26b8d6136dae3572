"""The batch's key bounds (:mod:`sharesync.sync.planning.key_ranges`) as a Spark condition on the target.

Both MERGEs by key (merge mode, history mode) add it to their ON clause: target-only literal
conditions are what Delta on Spark and Sail prune files with before the join.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import quote_identifier
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.planning.key_ranges import KeyBound, KeySpan, key_bounds

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["bounds_of", "within_bounds"]


def bounds_of(spans: Sequence[KeySpan], state: TargetState) -> tuple[KeyBound, ...]:
    """The bounds for the target as ``state`` describes it (no table: no bounds)."""
    types = {f["name"].lower(): f["type"] for f in (state.schema or {}).get("fields", [])}
    return key_bounds(spans, types)


def within_bounds(target_alias: str, bounds: Sequence[KeyBound]) -> Column | None:
    """``(t.k >= low AND t.k <= high) [OR t.k IS NULL]`` for every bound, ANDed; ``None`` for none."""
    from pyspark.sql import functions as F

    def one(bound: KeyBound) -> Column:
        column = F.col(f"{target_alias}.{quote_identifier(bound.column)}")
        if bound.low is None:
            return column.isNull()  # the batch holds only NULL there
        ranged = (column >= F.lit(bound.low)) & (column <= F.lit(bound.high))
        return ranged | column.isNull() if bound.or_null else ranged

    return reduce(lambda a, b: a & b, [one(b) for b in bounds]) if bounds else None
