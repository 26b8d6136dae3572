"""User predicates + table schema → one typed tree, or a ConfigError that says what to fix.

Binding happens once per table, as soon as the schema is known, so that a bad filter fails
before any data moves. It resolves ``col`` case-insensitively (as the protocol treats
column names), checks each value against the column type and turns it into the typed
literal every later function relies on:

==================  =====================================  =========================
column kind         accepted ``val``                       literal
==================  =====================================  =========================
byte … long         integers (``3.0`` too) within range    int
float, double       numbers, not NaN                       float (float32-rounded)
decimal(p,s)        numbers or numeric strings             Decimal (exact)
string              strings                                str
boolean             true / false                           bool
date                ``YYYY-MM-DD`` (or a YAML date)        date
timestamp           ISO-8601; no offset means UTC          aware UTC datetime
timestamp_ntz       ISO-8601 without offset                naive datetime
==================  =====================================  =========================
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from contextlib import suppress
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.filters import Op, Predicate
from sharesync.sync.predicates.expr import (
    TRUE,
    CmpOp,
    Comparison,
    Expr,
    In,
    IsNotNull,
    IsNull,
    Like,
    Literal,
    Ref,
    and_,
)
from sharesync.sync.predicates.types import (
    INTEGRAL_RANGES,
    MAX_DECIMAL_PRECISION,
    SUPPORTED_TYPES,
    Kind,
    kind_of,
)
from sharesync.sync.predicates.values import parse_instant, parse_wall_clock, to_float32

if TYPE_CHECKING:
    from sharesync.sync.protocol.wire import StructType

_COMPARISONS = {
    Op.EQ: CmpOp.EQ,
    Op.NEQ: CmpOp.NEQ,
    Op.GT: CmpOp.GT,
    Op.GTE: CmpOp.GTE,
    Op.LT: CmpOp.LT,
    Op.LTE: CmpOp.LTE,
}


class _Invalid(Exception):
    """What is wrong with one predicate and how to fix it; becomes a ConfigError."""


def bind(
    predicates: Sequence[Predicate | Mapping[str, Any]],
    schema: StructType,
    *,
    table: str | None = None,
) -> Expr:
    """The AND of ``predicates``, bound to ``schema``; TRUE when there are none.

    Raises ConfigError naming the table, the predicate, what is wrong and the fix.
    """
    leaves: list[Expr] = []
    for index, raw in enumerate(predicates):
        where = f"{f'table {table!r}: ' if table else ''}where[{index}] {_show(raw)}"
        try:
            predicate = raw if isinstance(raw, Predicate) else Predicate.model_validate(raw)
            leaves.append(_bind_one(predicate, schema))
        except ValidationError as exc:
            problems = "; ".join(_problem(e) for e in exc.errors(include_url=False))
            raise ConfigError(f"{where}: {problems}") from None
        except _Invalid as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return and_(*leaves) if leaves else TRUE


def parse_where(
    predicates: Sequence[Predicate | Mapping[str, Any]], schema: StructType, *, table: str | None = None
) -> Expr:
    """The table's ``where:`` list as one bound tree (same as :func:`bind`)."""
    return bind(predicates, schema, table=table)


def _bind_one(predicate: Predicate, schema: StructType) -> Expr:
    field = schema.field(predicate.col)
    if field is None:
        available = ", ".join(schema.names) or "(none)"
        raise _Invalid(f"no column {predicate.col!r} in the table; available columns: {available}")
    ref = Ref(field.name, field.type_name)
    kind = kind_of(field.type_name)
    if kind is None:
        raise _Invalid(
            f"column {field.name!r} has type {field.type_name}, which filters do not support; "
            f"filter on a top-level column of type {SUPPORTED_TYPES}"
        )
    op = predicate.op
    if op is Op.IS_NULL:
        return IsNull(ref)
    if op is Op.IS_NOT_NULL:
        return IsNotNull(ref)
    if op in (Op.LIKE, Op.ILIKE):
        if kind is not Kind.STRING:
            raise _Invalid(
                f"'{op}' works on string columns only, and {field.name!r} is {field.type_name}; "
                "compare it with eq/neq/gt/gte/lt/lte/in instead"
            )
        _check_pattern(predicate.val)
        return Like(ref, predicate.val, case_insensitive=op is Op.ILIKE)
    if op is Op.IN:
        values = tuple(dict.fromkeys(_literal(v, ref, kind) for v in predicate.val))
        return In(ref, values)
    return Comparison(ref, _COMPARISONS[op], _literal(predicate.val, ref, kind))


def _check_pattern(pattern: str) -> None:
    """Spark rejects a backslash that escapes anything but ``%``, ``_`` or ``\\``; so do we,
    at load time, so that every engine reads the pattern the same way."""
    chars = iter(pattern)
    for char in chars:
        if char == "\\" and next(chars, None) not in ("%", "_", "\\"):
            raise _Invalid(
                "in a like pattern a backslash must be followed by %, _ or another backslash "
                r"(write \% for a literal percent sign, \\ for a backslash)"
            )


def _literal(value: Any, ref: Ref, kind: Kind) -> Literal:
    """``value`` as the typed literal for a column of this kind (see the module table)."""
    column = f"column {ref.name!r} is {ref.type_name}"
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    match kind:
        case Kind.INTEGRAL:
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                raise _Invalid(f"{column}, so 'val' must be a whole number, e.g. 42 (got {value!r})")
            low, high = INTEGRAL_RANGES[ref.type_name.strip().lower()]
            if not low <= value <= high:
                raise _Invalid(f"{column}, which holds {low}..{high}; {value} is out of range")
            return value
        case Kind.FLOAT | Kind.DOUBLE:
            if not is_number:
                raise _Invalid(f"{column}, so 'val' must be a number, e.g. 2.5 (got {value!r})")
            number = float(value)
            if math.isnan(number):
                raise _Invalid(f"{column}; NaN is not a usable filter value, use a number")
            if kind is Kind.FLOAT:
                # A float column holds float32 values: compare with the float32 the user means.
                try:
                    return to_float32(number)
                except OverflowError:
                    raise _Invalid(f"{column}; {value} is outside the float range") from None
            return number
        case Kind.DECIMAL:
            return _decimal(value, column)
        case Kind.STRING:
            if not isinstance(value, str):
                raise _Invalid(f"{column}, so 'val' must be a string; quote it: '{value}'")
            return value
        case Kind.BOOLEAN:
            if not isinstance(value, bool):
                raise _Invalid(f"{column}, so 'val' must be true or false, unquoted (got {value!r})")
            return value
        case Kind.DATE:
            if isinstance(value, date) and not isinstance(value, datetime):
                return value
            if isinstance(value, str) and len(value.strip()) == 10:  # not 20240131, not a timestamp
                with suppress(ValueError):
                    return date.fromisoformat(value.strip())
            raise _Invalid(f"{column}, so 'val' must be a date like '2024-01-31' (got {value!r})")
        case Kind.TIMESTAMP | Kind.TIMESTAMP_NTZ:
            return _timestamp(value, kind, column)
    raise _Invalid(f"{column}, which filters do not support")  # unreachable: kind_of covers it


def _decimal(value: Any, column: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _Invalid(f"{column}, so 'val' must be a number, e.g. 12.50 (got {value!r})")
    try:
        # repr() of a float is the shortest text that reads back the same: 0.1 means 0.1.
        number = Decimal(repr(value) if isinstance(value, float) else str(value).strip())
    except InvalidOperation:
        raise _Invalid(f"{column}, so 'val' must be a number, e.g. 12.50 (got {value!r})") from None
    if not number.is_finite():
        raise _Invalid(f"{column}; {value!r} is not a finite number")
    if number.as_tuple().exponent > 0:  # type: ignore[operator]  # finite: exponent is an int
        number = number.quantize(Decimal(1))
    if len(number.as_tuple().digits) > MAX_DECIMAL_PRECISION:
        raise _Invalid(f"{column}; {value!r} has more than {MAX_DECIMAL_PRECISION} digits")
    return number


def _timestamp(value: Any, kind: Kind, column: str) -> datetime:
    example = "'2024-01-31T12:00:00Z'" if kind is Kind.TIMESTAMP else "'2024-01-31T12:00:00'"
    if isinstance(value, datetime):  # YAML reads an unquoted timestamp as a datetime
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = parse_instant(value) if kind is Kind.TIMESTAMP else parse_wall_clock(value)
        except ValueError as exc:
            detail = str(exc) if "time zone" in str(exc) else f"got {value!r}"
            raise _Invalid(f"{column}, so 'val' must be an ISO-8601 timestamp like {example} ({detail})") from None
    else:
        raise _Invalid(f"{column}, so 'val' must be an ISO-8601 timestamp like {example} (got {value!r})")
    if kind is Kind.TIMESTAMP:
        return parse_instant(moment.isoformat())  # naive means UTC, as everywhere in sharesync
    if moment.tzinfo is not None:
        raise _Invalid(f"{column}, which has no time zone; write the value without an offset, e.g. {example}")
    return moment


def _problem(error: Any) -> str:
    """One pydantic error as ``'op': Input should be 'eq', 'neq', …`` (the field, then what is wrong)."""
    message = str(error["msg"]).removeprefix("Value error, ")
    field = ".".join(map(str, error["loc"]))
    return f"{field!r}: {message}" if field else message


def _show(raw: Predicate | Mapping[str, Any]) -> str:
    data = raw.model_dump(exclude_none=True, mode="json") if isinstance(raw, Predicate) else dict(raw)
    return json.dumps(data, default=str, ensure_ascii=False)
