"""File pruning: may a file hold a row for which the filter is TRUE?

``may_match`` answers False only when the file's partition values and statistics *prove*
that no row matches; anything unknown, missing or odd answers True (reading a file too many
costs time, skipping one loses data).

Method. NOT under 3VL needs more than "can it be true": ``NOT p`` is TRUE exactly where
``p`` is FALSE. So every node gets two over-approximations, "some row may make it TRUE" and
"some row may make it FALSE" (:func:`_can`); AND/OR/NOT combine them by Kleene's tables and
null rows make leaves neither. Each column is summarised once (:class:`_Column`):

* a partition column has one exact value per file, and its leaves are simply evaluated
  (except a zone-less ``timestamp`` value, which is known only to ±14 h: see ``_summarise``);
* otherwise stats give ``nullCount``/``numRecords`` (all null? any null?) and min/max, which
  are used only as bounds: ``lo <= every non-null, non-NaN value <= hi``.

Statistics rules (Delta Sharing protocol, "Per-file Statistics"):

* Missing stats, a missing column or a bound that does not parse as the column type never
  prune; neither do inconsistent ones (``min > max``, ``nullCount > numRecords``).
* float/double: non-finite bounds are dropped (Parquet predicate pushdown
  treats NaN bounds as no bound). NaN rows may hide behind finite bounds too, because
  Parquet-style writers leave NaN out of min/max; since Spark orders NaN above all values,
  ``>``, ``>=`` and ``<>`` can be TRUE on them and are never pruned on float stats.
  Doubles are exact (writers print round-trip text); float32 bounds are printed as the
  shortest float32 spelling (``0.1`` for 0.100000001…), so they are widened by a few ulps.
* strings: Delta truncates long max values (a prefix, sometimes plus a tie-break character),
  so max is not an upper bound. What does hold, whichever writer: every value's first
  ``len(max) - 1`` characters are ``<= max[:-1]``. Only that is used; min (a prefix of the
  true min) is a valid lower bound as it stands.
* timestamps: stats have millisecond precision (``2021-04-28T23:33:48.719Z``) while values
  have microseconds, so both bounds are widened by 1 ms (covers truncation and rounding).
* decimals arrive as JSON numbers (binary floats): bounds are widened to the neighbouring
  floats, whose exact decimal values bracket the true one.
* ``nullCount == numRecords``: all null, so comparisons, IN and LIKE cannot be TRUE (nor
  FALSE) and ``is_null`` can only be TRUE; ``nullCount == 0``: ``is_null`` cannot be TRUE.
  ``numRecords == 0``: the file is empty and is pruned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.predicates.evaluate import compare, evaluate, literal_prefix
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
    Leaf,
    Like,
    Literal,
    Not,
    Or,
    Ref,
)
from sharesync.sync.predicates.types import Kind
from sharesync.sync.predicates.values import parse_instant, parse_partition_value, parse_wall_clock

if TYPE_CHECKING:
    from sharesync.sync.protocol.wire import FileStats, StructType

_MS = timedelta(milliseconds=1)
_ANY_OFFSET = timedelta(hours=14)  # UTC offsets run from -12:00 to +14:00
_PHYSICAL_NAME = "delta.columnMapping.physicalName"


def may_match(
    expr: Expr,
    stats: FileStats | None,
    partition_values: Mapping[str, Any],
    schema: StructType,
) -> bool:
    """False only if no row of the file can satisfy ``expr``.

    ``partition_values`` are the file's raw protocol strings (typed values are accepted too);
    ``schema`` maps names to column-mapping physical names, under which stats may be keyed.
    """
    try:
        if stats is not None and stats.num_records == 0:
            return False
        return _can(expr, True, _File(stats, partition_values, schema))
    except (ValueError, TypeError, ArithmeticError, SharesyncError):
        return True  # unexpected stats or values: keep the file


class _File:
    """Lazily built per-column facts of one file."""

    def __init__(self, stats: FileStats | None, partition_values: Mapping[str, Any], schema: StructType) -> None:
        self.stats = stats
        self.partition_values = partition_values
        self.schema = schema
        self._columns: dict[Ref, _Column] = {}

    def column(self, ref: Ref) -> _Column:
        if ref not in self._columns:
            self._columns[ref] = self._summarise(ref)
        return self._columns[ref]

    def _summarise(self, ref: Ref) -> _Column:
        names = self._names(ref)
        found, raw = _lookup(self.partition_values, names)
        if found:
            value = parse_partition_value(raw, ref.type_name) if raw is None or isinstance(raw, str) else raw
            if ref.kind is Kind.TIMESTAMP and value is not None and isinstance(raw, str) and not _has_offset(raw):
                # Delta Spark has written zone-less timestamp partition values in the writer's
                # session time zone, not UTC: only a window of every possible offset is known.
                return _Column(may_null=False, lo=value - _ANY_OFFSET, hi=value + _ANY_OFFSET)
            return _Column(exact=True, value=value)
        stats = self.stats
        if stats is None:
            return _UNKNOWN
        total = stats.num_records if _is_count(stats.num_records) else None
        nulls = _lookup(stats.null_count, names)[1]
        nulls = nulls if _is_count(nulls) else None
        if total is not None and nulls is not None and nulls > total:
            return _UNKNOWN  # inconsistent
        may_null = nulls is None or nulls > 0
        may_value = not (total is not None and nulls is not None and nulls == total)
        lo = _bound(ref.kind, _lookup(stats.min_values, names)[1], lower=True)
        hi = _bound(ref.kind, _lookup(stats.max_values, names)[1], lower=False)
        if ref.kind is Kind.STRING:
            prefix = hi[:-1] if isinstance(hi, str) else None
            if lo is not None and prefix is not None and lo[: len(prefix)] > prefix:
                lo = prefix = None  # inconsistent
            return _Column(may_null=may_null, may_value=may_value, lo=lo, max_prefix=prefix)
        if lo is not None and hi is not None and compare(lo, hi) > 0:
            lo = hi = None  # inconsistent
        return _Column(
            may_null=may_null,
            may_value=may_value,
            lo=lo,
            hi=hi,
            may_nan=ref.kind in (Kind.FLOAT, Kind.DOUBLE),
        )

    def _names(self, ref: Ref) -> list[str]:
        """Keys a column may appear under: its name, then its column-mapping physical name."""
        names = [ref.name]
        field = self.schema.field(ref.name)
        physical = field.metadata.get(_PHYSICAL_NAME) if field is not None else None
        if isinstance(physical, str):
            names.append(physical)
        return names


@dataclass(frozen=True)
class _Column:
    """What one file tells about one column."""

    exact: bool = False  # a partition column: every row holds `value`
    value: Any = None
    may_null: bool = True
    may_value: bool = True  # some row may be non-null
    lo: Any = None  # lower bound of non-null, non-NaN values (None: unknown)
    hi: Any = None  # upper bound, likewise (never set for strings)
    max_prefix: str | None = None  # strings: every value v has v[:len(max_prefix)] <= max_prefix
    may_nan: bool = False

    def all_below(self, value: Literal, strict: bool) -> bool:
        """Provably every non-NaN value is < value (strict) or <= value."""
        if self.max_prefix is not None:
            assert isinstance(value, str)
            # v[:m] <= max_prefix < value[:m] means v < value.
            return value[: len(self.max_prefix)] > self.max_prefix
        if self.hi is None:
            return False
        order = compare(self.hi, value)
        return order < 0 if strict else order <= 0

    def all_above(self, value: Literal, strict: bool) -> bool:
        """Provably every non-NaN value is > value (strict) or >= value."""
        if self.lo is None:
            return False
        order = compare(self.lo, value)
        return order > 0 if strict else order >= 0


_UNKNOWN = _Column()


def _can(expr: Expr, outcome: bool, file: _File) -> bool:
    """May ``expr`` be ``outcome`` (TRUE or FALSE, not unknown) for some row of the file?"""
    match expr:
        case AlwaysTrue():
            return outcome
        case AlwaysFalse():
            return not outcome
        case And(operands):
            if outcome:
                return all(_can(o, True, file) for o in operands)
            return any(_can(o, False, file) for o in operands)
        case Or(operands):
            if outcome:
                return any(_can(o, True, file) for o in operands)
            return all(_can(o, False, file) for o in operands)
        case Not(operand):
            return _can(operand, not outcome, file)
        case Comparison(ref) | In(ref) | IsNull(ref) | IsNotNull(ref) | Like(ref):
            return _can_leaf(expr, outcome, file.column(ref))
    return True


def _can_leaf(leaf: Leaf, outcome: bool, column: _Column) -> bool:
    if column.exact:
        return evaluate(leaf, {leaf.ref.name: column.value}) is outcome
    match leaf:
        case IsNull():
            return column.may_null if outcome else column.may_value
        case IsNotNull():
            return column.may_value if outcome else column.may_null
    if not column.may_value:
        return False  # all null: comparisons, IN and LIKE are unknown on every row
    match leaf:
        case Comparison(_, op, value):
            return _can_compare(op, value, outcome, column)
        case In(_, values):
            if outcome:
                return any(_can_compare(CmpOp.EQ, v, True, column) for v in values)
            # a row outside the set differs from every value
            return all(_can_compare(CmpOp.EQ, v, False, column) for v in values)
        case Like(_, pattern, case_insensitive):
            return not outcome or case_insensitive or _can_like(literal_prefix(pattern), column)
    return True


def _can_compare(op: CmpOp, value: Literal, outcome: bool, column: _Column) -> bool:
    """May ``x op value`` be ``outcome`` for a non-null ``x`` of the column?"""
    # NaN rows (Spark order: NaN above every value, equal only to NaN; literals are never NaN)
    if column.may_nan and op.apply(1, 0) is outcome:
        return True
    # regular rows, within [lo, hi]
    match op, outcome:
        case (CmpOp.GT, True) | (CmpOp.LTE, False):  # some x > value
            return not column.all_below(value, strict=False)
        case (CmpOp.GTE, True) | (CmpOp.LT, False):  # some x >= value
            return not column.all_below(value, strict=True)
        case (CmpOp.LT, True) | (CmpOp.GTE, False):  # some x < value
            return not column.all_above(value, strict=False)
        case (CmpOp.LTE, True) | (CmpOp.GT, False):  # some x <= value
            return not column.all_above(value, strict=True)
        case (CmpOp.EQ, True) | (CmpOp.NEQ, False):  # some x = value
            return not (column.all_below(value, strict=True) or column.all_above(value, strict=True))
        case (CmpOp.NEQ, True) | (CmpOp.EQ, False):  # some x <> value
            return not (column.all_below(value, strict=False) and column.all_above(value, strict=False))
    return True


def _can_like(prefix: str, column: _Column) -> bool:
    """May some value start with ``prefix`` (every match of a case-sensitive LIKE does)?"""
    if not prefix:
        return True
    if column.max_prefix is not None and prefix[: len(column.max_prefix)] > column.max_prefix:
        return False
    lo = column.lo
    return not (isinstance(lo, str) and lo > prefix and not lo.startswith(prefix))


# ---------------------------------------------------------------- reading stats


def _lookup(values: Mapping[str, Any], names: list[str]) -> tuple[bool, Any]:
    """(found, value) by exact name, then case-insensitively (the protocol ignores case)."""
    for name in names:
        if name in values:
            return True, values[name]
    lowered = {name.lower() for name in names}
    for key, value in values.items():
        if key.lower() in lowered:
            return True, value
    return False, None


def _has_offset(text: str) -> bool:
    """Does ISO-8601 text name its zone (``Z``, ``+02:00``, ``-0500`` after the time)?"""
    time = text.strip()[10:]
    return time.upper().endswith("Z") or "+" in time or "-" in time


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _bound(kind: Kind, raw: Any, *, lower: bool) -> Any:
    """A stats value as a safe bound of the column's type, or None when unusable."""
    if raw is None or (kind is Kind.BOOLEAN) != isinstance(raw, bool):  # True is also an int
        return None
    match kind:
        case Kind.BOOLEAN | Kind.STRING:
            return raw if isinstance(raw, bool | str) else None
        case Kind.INTEGRAL:
            if isinstance(raw, float) and math.isfinite(raw):
                return math.floor(raw) if lower else math.ceil(raw)
            return raw if isinstance(raw, int) else None
        case Kind.DOUBLE | Kind.FLOAT:
            if not isinstance(raw, int | float) or not math.isfinite(raw):
                return None  # NaN, ±Infinity, or the strings "NaN"/"Infinity"
            value = float(raw)
            if kind is Kind.FLOAT:  # "0.1" means float32 0.100000001…: widen by a few float32 ulps
                value += (abs(value) * 2.0**-20 + 2.0**-149) * (-1 if lower else 1)
            return value
        case Kind.DECIMAL:
            if isinstance(raw, int):
                return Decimal(raw)
            if isinstance(raw, float) and math.isfinite(raw):
                # the exact value of the neighbouring float brackets the decimal the JSON spelled
                return Decimal(math.nextafter(raw, -math.inf if lower else math.inf))
            return Decimal(raw) if isinstance(raw, str) else None
        case Kind.DATE:
            return date.fromisoformat(raw) if isinstance(raw, str) and len(raw) == 10 else None
        case Kind.TIMESTAMP | Kind.TIMESTAMP_NTZ:
            if not isinstance(raw, str):
                return None
            moment: datetime = parse_instant(raw) if kind is Kind.TIMESTAMP else parse_wall_clock(raw)
            return moment - _MS if lower else moment + _MS
    return None
