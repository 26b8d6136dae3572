"""The filter as a ``pyarrow.compute.Expression``, for filtering parquet batches in Python.

Arrow's ``&``/``|`` on expressions are Kleene (``and_kleene``/``or_kleene``) and filtering
drops null results, so 3VL carries over. Two places where Arrow differs from Spark are
bridged here so that the result equals :func:`sharesync.sync.predicates.evaluate`:

* Arrow compares floats by IEEE rules (``NaN > 1`` is false); Spark puts NaN above every
  value. ``>``/``>=`` on float columns therefore also accept NaN (``is_nan``); the other
  operators already agree (``NaN <> v`` is true in both, ``= < <=`` false in both).
* ``is_in`` answers false, not null, for a null input (so ``NOT IN`` would match nulls) and
  hashes ``-0.0`` apart from ``0.0``; IN is built as an OR of equalities instead.

pyarrow is imported when called, so importing :mod:`sharesync.sync.predicates` stays cheap.
"""

from __future__ import annotations

from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING

from sharesync.sync.predicates.expr import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    CmpOp,
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
    import pyarrow as pa
    import pyarrow.compute as pc


def to_arrow(expr: Expr, schema: pa.Schema | None = None) -> pc.Expression:
    """``expr`` as an Arrow expression over field names.

    ``schema`` (the parquet file's Arrow schema) is only needed when a ``timestamp`` column
    is stored without a time zone (e.g. INT96 from older Spark writers): its literals are
    then naive UTC so that Arrow can compare them.
    """
    import pyarrow.compute as pc

    def build(node: Expr) -> pc.Expression:
        match node:
            case AlwaysTrue():
                return pc.scalar(True)
            case AlwaysFalse():
                return pc.scalar(False)
            case And(operands):
                return reduce(lambda a, b: a & b, (build(o) for o in operands))
            case Or(operands):
                return reduce(lambda a, b: a | b, (build(o) for o in operands))
            case Not(operand):
                return ~build(operand)
            case IsNull(ref):
                return pc.field(ref.name).is_null()
            case IsNotNull(ref):
                return pc.field(ref.name).is_valid()
            case Comparison(ref, op, value):
                return compare(ref, op, value)
            case In(ref, values):
                return reduce(lambda a, b: a | b, (compare(ref, CmpOp.EQ, v) for v in values))
            case Like(ref, pattern, case_insensitive):
                return pc.match_like(pc.field(ref.name), pattern, ignore_case=case_insensitive)
        raise TypeError(f"not a predicate node: {node!r}")

    def compare(ref: Ref, op: CmpOp, value: Literal) -> pc.Expression:
        column = pc.field(ref.name)
        scalar = _scalar(ref, value, schema)
        result: pc.Expression = op.apply(column, scalar)
        if ref.kind in (Kind.FLOAT, Kind.DOUBLE) and op in (CmpOp.GT, CmpOp.GTE):
            result = result | pc.is_nan(column)  # Spark: NaN is above every value
        return result

    return build(expr)


def _scalar(ref: Ref, value: Literal, schema: pa.Schema | None) -> pa.Scalar:
    import pyarrow as pa

    match ref.kind:
        case Kind.INTEGRAL:
            return pa.scalar(value, pa.int64())
        case Kind.FLOAT | Kind.DOUBLE:
            return pa.scalar(value, pa.float64())  # float32 literals are exact in float64
        case Kind.TIMESTAMP:
            if schema is not None and schema.get_field_index(ref.name) >= 0:
                stored = schema.field(ref.name).type
                if pa.types.is_timestamp(stored) and stored.tz is None:
                    assert isinstance(value, datetime)
                    return pa.scalar(value.replace(tzinfo=None), pa.timestamp("us"))
            return pa.scalar(value, pa.timestamp("us", tz="UTC"))
        case Kind.TIMESTAMP_NTZ:
            return pa.scalar(value, pa.timestamp("us"))
        case Kind.DATE:
            return pa.scalar(value, pa.date32())
        case _:  # bool, str, Decimal (Arrow compares decimals of different scales exactly)
            return pa.scalar(value)
