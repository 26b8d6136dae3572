"""The bound filter tree: frozen nodes over real column names and typed literals.

Modelled on pyiceberg ``expressions/``: the tree is plain data and every use of it (server
hints, Spark and Arrow evaluation, file pruning) is a function over it in its own module.
Semantics are SQL three-valued logic (Kleene): a comparison with null is *unknown*, NOT of
unknown is unknown, and a row is selected only when the whole filter is TRUE.
Floating-point values follow Spark's ordering, which Sail shares: NaN equals NaN and sorts
above every other value (so ``NaN > 1`` is TRUE), and ``-0.0 = 0.0``.

Nodes are built by :func:`sharesync.sync.predicates.bind`; the helpers :func:`and_`, :func:`or_` and
:func:`not_` flatten and fold constants, which is valid under 3VL (``FALSE AND unknown`` is
FALSE, ``TRUE OR unknown`` is TRUE).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from sharesync.sync.predicates.types import Kind, kind_of

Literal = bool | int | float | Decimal | str | date | datetime
"""A typed literal: the Python type follows the column kind (see :func:`sharesync.sync.predicates.bind`)."""


@dataclass(frozen=True)
class Ref:
    """A resolved top-level column: its real (schema) name and its Delta type name."""

    name: str
    type_name: str

    @property
    def kind(self) -> Kind:
        kind = kind_of(self.type_name)
        if kind is None:
            raise ValueError(f"column {self.name!r} has unsupported type {self.type_name!r}")
        return kind


class CmpOp(StrEnum):
    """Comparison operators, valued by their SQL spelling."""

    EQ = "="
    NEQ = "<>"
    LT = "<"
    LTE = "<="
    GT = ">"
    GTE = ">="

    @property
    def negated(self) -> CmpOp:
        """NOT (x op v) ≡ x negated(op) v: holds under 3VL (null stays unknown) and under
        Spark's NaN ordering (NaN is the largest value and equals only itself)."""
        return _NEGATED[self]

    def apply(self, left: Any, right: Any) -> Any:
        """``left op right`` through Python's operators, which Spark columns and Arrow
        expressions overload (and ``compare(a, b) op 0`` decides a Python comparison)."""
        return _FUNCTIONS[self](left, right)


_FUNCTIONS = {
    CmpOp.EQ: operator.eq,
    CmpOp.NEQ: operator.ne,
    CmpOp.LT: operator.lt,
    CmpOp.LTE: operator.le,
    CmpOp.GT: operator.gt,
    CmpOp.GTE: operator.ge,
}
_NEGATED = {
    CmpOp.EQ: CmpOp.NEQ,
    CmpOp.NEQ: CmpOp.EQ,
    CmpOp.LT: CmpOp.GTE,
    CmpOp.GTE: CmpOp.LT,
    CmpOp.GT: CmpOp.LTE,
    CmpOp.LTE: CmpOp.GT,
}


@dataclass(frozen=True)
class AlwaysTrue:
    pass


@dataclass(frozen=True)
class AlwaysFalse:
    pass


@dataclass(frozen=True)
class And:
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Or:
    operands: tuple[Expr, ...]


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class Comparison:
    ref: Ref
    op: CmpOp
    value: Literal


@dataclass(frozen=True)
class In:
    """``ref IN (values)``: TRUE if equal to one, unknown if ``ref`` is null, else FALSE."""

    ref: Ref
    values: tuple[Literal, ...]


@dataclass(frozen=True)
class IsNull:
    ref: Ref


@dataclass(frozen=True)
class IsNotNull:
    ref: Ref


@dataclass(frozen=True)
class Like:
    """SQL LIKE (``%`` any run, ``_`` one character, ``\\`` escapes); ILIKE when
    ``case_insensitive`` (Spark defines it as ``lower(ref) LIKE lower(pattern)``)."""

    ref: Ref
    pattern: str
    case_insensitive: bool = False


Leaf = Comparison | In | IsNull | IsNotNull | Like
Expr = AlwaysTrue | AlwaysFalse | And | Or | Not | Leaf

TRUE = AlwaysTrue()
FALSE = AlwaysFalse()


def and_(*operands: Expr) -> Expr:
    """Conjunction, flattened; TRUE operands vanish and any FALSE operand wins."""
    flat: list[Expr] = []
    for operand in operands:
        if isinstance(operand, AlwaysFalse):
            return FALSE
        if isinstance(operand, And):
            flat.extend(operand.operands)
        elif not isinstance(operand, AlwaysTrue):
            flat.append(operand)
    if not flat:
        return TRUE
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def or_(*operands: Expr) -> Expr:
    """Disjunction, flattened; FALSE operands vanish and any TRUE operand wins."""
    flat: list[Expr] = []
    for operand in operands:
        if isinstance(operand, AlwaysTrue):
            return TRUE
        if isinstance(operand, Or):
            flat.extend(operand.operands)
        elif not isinstance(operand, AlwaysFalse):
            flat.append(operand)
    if not flat:
        return FALSE
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


def not_(operand: Expr) -> Expr:
    if isinstance(operand, AlwaysTrue):
        return FALSE
    if isinstance(operand, AlwaysFalse):
        return TRUE
    if isinstance(operand, Not):
        return operand.operand
    return Not(operand)


def rewrite_not(expr: Expr) -> Expr:
    """Push every NOT down to the leaves (negation normal form), keeping 3VL meaning.

    De Morgan and double negation hold in Kleene logic; a negated comparison flips its
    operator (:attr:`CmpOp.negated`); ``NOT (x IN (a, b))`` becomes ``x <> a AND x <> b``
    (unknown for a null ``x`` on both sides). Only ``NOT LIKE`` stays a ``Not`` node.
    Hints need this form: a NOT can then only sit on a leaf, so widening a conjunct
    (dropping it) never happens under a negation.
    """
    match expr:
        case And(operands):
            return and_(*(rewrite_not(o) for o in operands))
        case Or(operands):
            return or_(*(rewrite_not(o) for o in operands))
        case Not(operand):
            return _negate(operand)
        case _:
            return expr


def _negate(expr: Expr) -> Expr:
    match expr:
        case AlwaysTrue():
            return FALSE
        case AlwaysFalse():
            return TRUE
        case And(operands):
            return or_(*(_negate(o) for o in operands))
        case Or(operands):
            return and_(*(_negate(o) for o in operands))
        case Not(operand):
            return rewrite_not(operand)
        case Comparison(ref, op, value):
            return Comparison(ref, op.negated, value)
        case In(ref, values):
            return and_(*(Comparison(ref, CmpOp.NEQ, v) for v in values))
        case IsNull(ref):
            return IsNotNull(ref)
        case IsNotNull(ref):
            return IsNull(ref)
        case Like():
            return Not(expr)
    raise TypeError(f"not a predicate node: {expr!r}")


def conjuncts(expr: Expr) -> tuple[Expr, ...]:
    """The top-level AND operands (the expression itself when it is not an AND)."""
    if isinstance(expr, And):
        return expr.operands
    if isinstance(expr, AlwaysTrue):
        return ()
    return (expr,)


def columns_referenced(expr: Expr) -> set[str]:
    """Real names of every column the expression reads (the sync must keep them)."""
    match expr:
        case And(operands) | Or(operands):
            return set().union(*(columns_referenced(o) for o in operands))
        case Not(operand):
            return columns_referenced(operand)
        case Comparison(ref) | In(ref) | IsNull(ref) | IsNotNull(ref) | Like(ref):
            return {ref.name}
        case _:
            return set()
