"""The filter as a Spark ``Column``, applied by the Spark jobs to every batch it reads.

Server-side filtering is best effort (Delta Sharing protocol, "Filtering": clients
must always apply predicates), so this is where the filter becomes exact. Only functions
that work over Spark Connect on both Sail and Apache Spark are used: ``col``, comparisons,
``isin``, ``isNull``/``isNotNull``, ``like``/``ilike`` and ``& | ~``; Spark's own 3VL and NaN
ordering then agree with :func:`sharesync.sync.predicates.evaluate` (checked against Sail in tests).

Literals are typed explicitly rather than through ``F.lit`` inference, which is unreliable
for two types: the Connect client declares ``F.lit(Decimal(...))`` as ``decimal(10,0)``
whatever its scale (Sail 0.7 happens to ignore the declared type; a server that honours it
would round), and a naive ``datetime`` is converted in the client's local time zone.
Decimals and temporal values are therefore sent as text and cast; timestamp text carries
its ``Z``, so the session time zone does not matter (tested with a non-UTC session).
pyspark is imported when called; nothing else in the package needs it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from functools import reduce
from typing import TYPE_CHECKING

from sharesync.sync.predicates.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    Comparison,
    Expr,
    In,
    IsNotNull,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    Ref,
)
from sharesync.sync.predicates.types import Kind

if TYPE_CHECKING:
    from pyspark.sql import Column


def to_spark(expr: Expr) -> Column:
    """``expr`` as a boolean Spark column (rows where it is TRUE are the ones to keep)."""
    from pyspark.sql import functions as F

    match expr:
        case AlwaysTrue():
            return F.lit(True)
        case AlwaysFalse():
            return F.lit(False)
        case And(operands):
            return reduce(lambda a, b: a & b, (to_spark(o) for o in operands))
        case Or(operands):
            return reduce(lambda a, b: a | b, (to_spark(o) for o in operands))
        case Not(operand):
            return ~to_spark(operand)
        case IsNull(ref):
            return column(ref).isNull()
        case IsNotNull(ref):
            return column(ref).isNotNull()
        case Comparison(ref, op, value):
            compared: Column = op.apply(column(ref), literal(ref, value))
            return compared
        case In(ref, values):
            return _null_when_null(ref, column(ref).isin(*(literal(ref, v) for v in _both_zeros(ref, values))))
        case Like(ref, pattern, case_insensitive):
            # Column.ilike exists in Spark >= 3.3 and works on Sail 0.7.
            matched: Column = column(ref).ilike(pattern) if case_insensitive else column(ref).like(pattern)
            return matched
    raise TypeError(f"not a predicate node: {expr!r}")


def _null_when_null(ref: Ref, membership: Column) -> Column:
    """``col IN (…)`` spelled ``CASE WHEN col IS NULL THEN NULL ELSE col IN (…) END``: the same value.

    Sail 0.7's optimiser folds ``x IN (a) AND x IN (b)`` with disjoint lists to FALSE, which is
    wrong for a NULL ``x`` (NULL in SQL), so ``NOT (…)`` of it kept NULL rows (found by the
    random-tree test: ``NOT (b IN (false) AND b IN (true))``). An OR of equalities is folded the
    same way; the CASE hides the lists from that rule and states the NULL case itself.
    """
    from pyspark.sql import functions as F

    return F.when(column(ref).isNull(), F.lit(None).cast("boolean")).otherwise(membership)


def _both_zeros(ref: Ref, values: tuple[Literal, ...]) -> tuple[Literal, ...]:
    """A float IN list holding a zero gets both signed zeros.

    SQL equality has -0.0 = 0.0, but Sail 0.7 matches a float32 IN list of two or more values
    bit for bit (found by the random-tree test: ``f IN (0.1, -0.0)`` missed a row holding 0.0).
    Adding the other zero keeps the meaning and sidesteps it on any engine.
    """
    if ref.kind not in (Kind.FLOAT, Kind.DOUBLE) or not any(v == 0 for v in values):
        return values
    return (*(v for v in values if v != 0), 0.0, -0.0)


def column(ref: Ref) -> Column:
    """The column by its exact name; backticks keep dots and odd characters literal."""
    from pyspark.sql import functions as F

    return F.col("`" + ref.name.replace("`", "``") + "`")


def literal(ref: Ref, value: Literal) -> Column:
    """A literal of the column's type (see the module docstring for why some are cast)."""
    from pyspark.sql import functions as F

    match ref.kind:
        case Kind.DECIMAL:
            assert isinstance(value, Decimal)
            precision, scale = decimal_type_of(value)
            return F.lit(format(value, "f")).cast(f"decimal({precision},{scale})")
        case Kind.DATE:
            assert isinstance(value, date)
            return F.lit(value.isoformat()).cast("date")
        case Kind.TIMESTAMP:
            assert isinstance(value, datetime)
            return F.lit(value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")).cast("timestamp")
        case Kind.TIMESTAMP_NTZ:
            assert isinstance(value, datetime)
            return F.lit(value.strftime("%Y-%m-%d %H:%M:%S.%f")).cast("timestamp_ntz")
        case _:  # bool, int (int or bigint by range), float (double; float32 values are exact), str
            return F.lit(value)


def decimal_type_of(value: Decimal) -> tuple[int, int]:
    """The smallest ``decimal(p, s)`` that holds ``value`` exactly."""
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    precision = max(len(value.as_tuple().digits) + max(exponent, 0), scale, 1)
    return precision, scale
