"""The reference evaluator: one row in, TRUE / FALSE / unknown (None) out.

It is the definition the engines are tested against (Spark and Arrow filtering must select
exactly the rows for which this returns True) and pruning uses it on exact partition values.
Semantics, per SQL three-valued logic as Parquet predicate pushdown applies it: any
comparison, IN or LIKE with a null operand is unknown, so ``neq`` never matches a null;
NOT keeps unknown unknown; AND/OR are Kleene's. Floats follow Spark (checked on Sail too):
NaN equals NaN and is greater than every other value; ``-0.0 = 0.0``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

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
    Not,
    Or,
    Ref,
)
from sharesync.sync.predicates.types import Kind


def evaluate(expr: Expr, row: Mapping[str, Any]) -> bool | None:
    """The 3VL value of ``expr`` for ``row`` (keyed by real column names; None is null)."""
    match expr:
        case AlwaysTrue():
            return True
        case AlwaysFalse():
            return False
        case And(operands):
            results = [evaluate(o, row) for o in operands]
            if False in results:
                return False
            return None if None in results else True
        case Or(operands):
            results = [evaluate(o, row) for o in operands]
            if True in results:
                return True
            return None if None in results else False
        case Not(operand):
            result = evaluate(operand, row)
            return None if result is None else not result
        case IsNull(ref):
            return row[ref.name] is None
        case IsNotNull(ref):
            return row[ref.name] is not None
        case Comparison(ref, op, value):
            cell = _cell(row, ref)
            return None if cell is None else bool(op.apply(compare(cell, value), 0))
        case In(ref, values):
            cell = _cell(row, ref)
            return None if cell is None else any(compare(cell, v) == 0 for v in values)
        case Like(ref, pattern, case_insensitive):
            cell = row[ref.name]
            return None if cell is None else like(cell, pattern, case_insensitive)
    raise TypeError(f"not a predicate node: {expr!r}")


def compare(left: Any, right: Any) -> int:
    """-1, 0 or 1 in Spark's order: NaN equals NaN and sorts above everything else."""
    left_nan = isinstance(left, float) and math.isnan(left)
    right_nan = isinstance(right, float) and math.isnan(right)
    if left_nan or right_nan:
        return int(left_nan) - int(right_nan)
    return -1 if left < right else (1 if left > right else 0)


def _cell(row: Mapping[str, Any], ref: Ref) -> Any:
    value = row[ref.name]
    if ref.kind is Kind.TIMESTAMP and isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)  # a naive instant is UTC, as everywhere in sharesync
    return value


def like(value: str, pattern: str, case_insensitive: bool = False) -> bool:
    """SQL LIKE; ILIKE is ``lower(value) LIKE lower(pattern)``, Spark's definition."""
    if case_insensitive:
        value, pattern = value.lower(), pattern.lower()
    return like_regex(pattern).fullmatch(value) is not None


@lru_cache(maxsize=1024)
def like_regex(pattern: str) -> re.Pattern[str]:
    """``%`` → any run, ``_`` → one character, ``\\x`` → literal x; ``%`` spans newlines (DOTALL)."""
    parts: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char == "\\":
            parts.append(re.escape(next(chars, "\\")))
        elif char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def literal_prefix(pattern: str) -> str:
    """The text every match of a case-sensitive LIKE pattern starts with (up to the first wildcard)."""
    prefix: list[str] = []
    chars = iter(pattern)
    for char in chars:
        if char in "%_":
            break
        prefix.append(next(chars, "\\") if char == "\\" else char)
    return "".join(prefix)
