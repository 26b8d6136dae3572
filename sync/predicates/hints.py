"""Filter hints for the sharing server: ``jsonPredicateHints`` and ``predicateHints``.

Spec: the Delta Sharing protocol's "Filtering" section (``predicateHints``, ``jsonPredicateHints``). Hints are best effort: the server may
ignore them and may return extra files, and we filter every row ourselves anyway. The one
thing a hint must never do is make the server drop a file that holds a matching row, so a
hint is always implied by the filter (it may be *wider*, never narrower):

* The filter is first put in negation normal form (:func:`rewrite_not`), so NOT sits only
  on leaves and widening never happens under a negation.
* A conjunct that cannot be expressed is dropped: ``A AND B`` implies ``A``. An OR with an
  inexpressible branch is dropped whole (the branch would have to become TRUE).
* Whatever the server does with null partition values, a hint in negation normal form that
  is TRUE under 3VL for a row is TRUE under any resolution of its unknown parts, so the file
  holding that row is kept. This is why ``neq`` may be sent as ``not(equal)`` and
  ``is_not_null`` as ``not(isNull)``: a file whose partition value is null has no row that
  satisfies ``neq``/``is_not_null`` (3VL), so pruning it, or not, loses nothing.
* Floats: servers may order them differently from Spark. Signed zeros are handled (see
  :func:`_zero_sign_matters`). A NaN *partition value* is not: a server with IEEE
  comparisons would drop it for ``>``/``>=`` although Spark says ``NaN > x``; keeping those
  hints (the spec's own example is ``balance > 0``) is worth that pathological case.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sharesync.sync.core.timestamps import to_wire
from sharesync.sync.predicates.expr import (
    And,
    CmpOp,
    Comparison,
    Expr,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    Or,
    Ref,
    conjuncts,
    rewrite_not,
)
from sharesync.sync.predicates.types import Kind
from sharesync.sync.predicates.values import float32_text


@dataclass(frozen=True)
class ServerHints:
    """The user's filter, as the hints the protocol lets us send (best effort on the server)."""

    predicate_hints: list[str] | None = None
    json_predicate_hints: str | None = None

    @classmethod
    def of(cls, expr: Expr | None, partition_columns: Sequence[str]) -> ServerHints:
        if expr is None:
            return cls()
        return cls(to_sql_hints(expr) or None, to_json_hints(expr, partition_columns))


# ---------------------------------------------------------------- jsonPredicateHints

_JSON_OPS = {
    CmpOp.EQ: "equal",
    CmpOp.LT: "lessThan",
    CmpOp.LTE: "lessThanOrEqual",
    CmpOp.GT: "greaterThan",
    CmpOp.GTE: "greaterThanOrEqual",
}
# The spec's value types. decimal and timestamp_ntz have none: their conjuncts are dropped.
_VALUE_TYPES = {
    "boolean": "bool",
    "byte": "int",
    "short": "int",
    "integer": "int",
    "long": "long",
    "string": "string",
    "date": "date",
    "float": "float",
    "double": "double",
    "timestamp": "timestamp",
}
Json = dict[str, Any]


def to_json_hints(expr: Expr, partition_columns: Iterable[str]) -> str | None:
    """The ``jsonPredicateHints`` string over partition columns only, or None if nothing of
    the filter can be expressed there (send no hint then)."""
    partitions = {name.lower() for name in partition_columns}
    tree = _json(rewrite_not(expr), partitions)
    return None if tree is None else json.dumps(tree, separators=(",", ":"))


def _json(expr: Expr, partitions: set[str]) -> Json | None:
    """A JSON predicate implied by ``expr`` (which is in negation normal form), or None."""
    match expr:
        case And(operands):
            children = [c for o in operands if (c := _json(o, partitions)) is not None]
            return _join("and", children)
        case Or(operands):
            branches = [_json(o, partitions) for o in operands]
            kept = [b for b in branches if b is not None]
            return _join("or", kept) if len(kept) == len(branches) else None
        case Not():
            return None  # in negation normal form only NOT LIKE is left, and LIKE has no JSON op
        case IsNull(ref) if _hintable(ref, partitions):
            return {"op": "isNull", "children": [_column(ref)]}
        case IsNotNull(ref) if _hintable(ref, partitions):
            return {"op": "not", "children": [{"op": "isNull", "children": [_column(ref)]}]}
        case Comparison(ref, op, value) if _hintable(ref, partitions):
            return _comparison(ref, op, value)
        case In(ref, values) if _hintable(ref, partitions):
            equals = [e for v in values if (e := _comparison(ref, CmpOp.EQ, v)) is not None]
            return _join("or", equals) if len(equals) == len(values) else None
    return None  # LIKE, constants, non-partition or untyped columns


def _hintable(ref: Ref, partitions: set[str]) -> bool:
    return ref.name.lower() in partitions and ref.type_name.strip().lower() in _VALUE_TYPES


def _comparison(ref: Ref, op: CmpOp, value: Literal) -> Json | None:
    text = _json_value(ref.kind, value)
    if text is None or _zero_sign_matters(ref.kind, op, value):
        return None
    literal = {"op": "literal", "value": text, "valueType": _VALUE_TYPES[ref.type_name.strip().lower()]}
    if op is CmpOp.NEQ:
        return {"op": "not", "children": [{"op": "equal", "children": [_column(ref), literal]}]}
    return {"op": _JSON_OPS[op], "children": [_column(ref), literal]}


def _column(ref: Ref) -> Json:
    return {"op": "column", "name": ref.name, "valueType": _VALUE_TYPES[ref.type_name.strip().lower()]}


def _json_value(kind: Kind, value: Literal) -> str | None:
    """The literal's text in the spec's formats; None when it has no safe spelling."""
    match kind:
        case Kind.BOOLEAN:
            return "true" if value else "false"
        case Kind.DOUBLE | Kind.FLOAT:
            return _number_text(kind, value)
        case Kind.DATE:
            assert isinstance(value, date)
            return value.isoformat()
        case Kind.TIMESTAMP:
            assert isinstance(value, datetime)
            return to_wire(value)  # "2022-01-01T00:00:00Z", the spec's example form
    return str(value)  # int, long, string


def _join(op: str, children: list[Json]) -> Json | None:
    """``and``/``or`` need at least two children (spec); one child stands alone."""
    if not children:
        return None
    return children[0] if len(children) == 1 else {"op": op, "children": children}


# ---------------------------------------------------------------- predicateHints (SQL)

_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def to_sql_hints(expr: Expr) -> list[str]:
    """``predicateHints``: one ``col op literal`` string per top-level conjunct that has one.

    Only the spec's simple forms (``= <> > < >= <= IS NULL IS NOT NULL``) are produced; OR,
    IN (unless single-valued), LIKE and NOT are dropped, which widens the hint (safe).
    """
    hints = []
    for conjunct in conjuncts(rewrite_not(expr)):
        hint = _sql(conjunct)
        if hint is not None:
            hints.append(hint)
    return hints


def _sql(expr: Expr) -> str | None:
    match expr:
        case IsNull(ref):
            return f"{_identifier(ref.name)} IS NULL"
        case IsNotNull(ref):
            return f"{_identifier(ref.name)} IS NOT NULL"
        case In(ref, (value,)):
            return _sql(Comparison(ref, CmpOp.EQ, value))
        case Comparison(ref, op, value):
            text = _sql_literal(ref.kind, value)
            if text is None or _zero_sign_matters(ref.kind, op, value):
                return None
            return f"{_identifier(ref.name)} {op.value} {text}"
    return None


def _identifier(name: str) -> str:
    """Plain when it is a simple name, else back-quoted the way Spark SQL reads it."""
    return name if _SIMPLE_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def _sql_literal(kind: Kind, value: Literal) -> str | None:
    """A SQL literal for the value, or None when no spelling is safe across SQL dialects.

    Strings: a single quote is written ``\\'`` (Spark SQL, which the reference connector
    speaks). The ANSI spelling ``''`` would silently become a different string in Spark SQL
    (adjacent literals concatenate), whereas ``\\'`` is a syntax error in ANSI SQL, which
    a server skips. A backslash has no spelling both read alike, so such strings get no hint.
    Timestamps get none either: a server comparing the text ``'2021-01-01T00:00:00Z'``
    against partition text ``2021-01-01 05:00:00`` as strings would prune wrongly.
    """
    match kind:
        case Kind.STRING:
            assert isinstance(value, str)
            if "\\" in value:
                return None
            return "'" + value.replace("'", "\\'") + "'"
        case Kind.DATE:
            assert isinstance(value, date)
            return f"'{value.isoformat()}'"  # the spec's own example: date >= '2021-01-01'
        case Kind.BOOLEAN:
            return "true" if value else "false"
        case Kind.INTEGRAL:
            return str(value)
        case Kind.DECIMAL:
            assert isinstance(value, Decimal)
            return format(value, "f")
        case Kind.DOUBLE | Kind.FLOAT:
            return _number_text(kind, value)
    return None  # timestamps (see above)


def _zero_sign_matters(kind: Kind, op: CmpOp, value: Literal) -> bool:
    """Would a server ordering floats like Java's ``Double.compare`` (-0.0 < 0.0) drop a file
    whose partition value is a zero of the other sign? Spark has ``-0.0 = 0.0``, so ``=``,
    ``>=`` and ``<=`` against a zero are not sent; ``<``, ``>`` and ``<>`` are safe."""
    return kind in (Kind.FLOAT, Kind.DOUBLE) and value == 0 and op in (CmpOp.EQ, CmpOp.GTE, CmpOp.LTE)


def _number_text(kind: Kind, value: Literal) -> str | None:
    """``0``, ``2.5``, ``0.1`` (a float32's shortest spelling); None for ±inf, which servers
    spell differently (``inf``, ``Infinity``)."""
    assert isinstance(value, float)
    if not math.isfinite(value):
        return None
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return float32_text(value) if kind is Kind.FLOAT else repr(value)
