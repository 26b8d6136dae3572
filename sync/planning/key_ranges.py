"""Which target rows a keyed batch can touch, as literal bounds the engine prunes files with — pure.

A MERGE on ``t.k = s.k`` (or NULL-safe ``<=>``) scans every target file unless its condition
says which keys can match. The batch knows: every key it holds lies between its smallest and
largest, so a target row outside ``[low, high]`` in any key column matches nothing. Adding
``t.k >= low AND t.k <= high`` to the MERGE's ON clause changes no result and lets both engines
skip files by their min/max statistics (docs/engines.md says what each does with it).

Exactness rules: a bound is given only where the literal compares exactly as the key match
does — integers, strings and dates whose batch and target types are of the same family.
Floats (NaN sorts above every number; ``-0.0 = 0.0``), binary, decimals, timestamps (the
session's time zone enters literals) and anything else get no bound. A key column holding NULL
in the batch is matched NULL-safe, so its bound keeps NULL target rows: ``… OR t.k IS NULL``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "FileRanges",
    "KeyBound",
    "KeySpan",
    "decisive_bounds",
    "key_bounds",
    "key_spans",
    "misses_every_file",
    "span_of",
    "type_family",
]

Literal = int | str | datetime.date
# One target file's statistics per key column: (min, max) of its non-NULL values, None where the
# file has none (no statistics, or only NULL there).
FileRanges = Mapping[str, tuple[object, object] | None]

_INTEGER, _STRING, _DATE = "integer", "string", "date"
# Arrow's spelling (str(pyarrow type)) of the batch's column; uint64 may not fit a long.
_ARROW = {
    **dict.fromkeys(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32"), _INTEGER),
    **dict.fromkeys(("string", "large_string", "string_view"), _STRING),
    "date32[day]": _DATE,
}
# Delta's spelling (the schema JSON's type) of the target's column.
_DELTA = {**dict.fromkeys(("byte", "short", "integer", "long"), _INTEGER), "string": _STRING, "date": _DATE}


@dataclass(frozen=True)
class KeySpan:
    """What the batch holds in one key column: its Arrow type, smallest and largest non-NULL
    value (``None`` when it holds none) and whether it holds NULL."""

    column: str
    arrow_type: str
    low: Literal | None
    high: Literal | None
    has_null: bool


@dataclass(frozen=True)
class KeyBound:
    """``low <= t.column <= high`` (no range when ``low`` is ``None``), ``OR t.column IS NULL``
    when ``or_null``; a bound with neither range nor NULL is never produced."""

    column: str
    low: Literal | None
    high: Literal | None
    or_null: bool


def key_spans(table: pa.Table, keys: Sequence[str]) -> tuple[KeySpan, ...]:
    """The smallest and largest value per key column of a batch (Arrow's ``min_max``: one pass
    over the keys a job reads anyway)."""
    return tuple(span_of(key, [table.column(key)]) for key in keys)


def span_of(column: str, parts: Sequence[pa.Array | pa.ChunkedArray]) -> KeySpan:
    """One key column's span over ``parts`` (the key's values in each kind of action). Parts of
    different types give a span of no type (no bound: their literals might not compare alike);
    an empty part's type does not count."""
    kinds = {str(part.type) for part in parts if len(part)} or {str(part.type) for part in parts[:1]}
    kind = kinds.pop() if len(kinds) == 1 else "mixed"
    has_null = any(part.null_count for part in parts)
    if kind not in _ARROW:
        return KeySpan(column, kind, None, None, has_null)
    lows, highs = [], []
    for part in parts:
        extremes = pc.min_max(part)
        if extremes["min"].is_valid:
            lows.append(extremes["min"].as_py())
            highs.append(extremes["max"].as_py())
    return KeySpan(column, kind, min(lows, default=None), max(highs, default=None), has_null)


def type_family(arrow_type: str, delta_type: object) -> str | None:
    """The family both sides share when a literal of the batch compares exactly with the target's
    column; ``None`` otherwise (a struct or a parametrised type is not a plain string here)."""
    family = _ARROW.get(arrow_type)
    return family if family is not None and isinstance(delta_type, str) and _DELTA.get(delta_type) == family else None


def key_bounds(spans: Sequence[KeySpan], target_types: Mapping[str, object]) -> tuple[KeyBound, ...]:
    """Bounds on the target's key columns that every row the batch can match satisfies.

    ``target_types``: the target's column types by lower-cased name (Delta schema JSON). A
    column without an exact literal gets no bound; an empty batch (no span with a value or a
    NULL) gets none at all, and neither does anything the target does not hold.
    """
    bounds = []
    for span in spans:
        if span.low is None and not span.has_null:
            continue  # no rows: nothing to match, and nothing to say
        delta_type = target_types.get(span.column.lower())
        if type_family(span.arrow_type, delta_type) is None:
            continue
        if span.low is None or span.high is None:
            bounds.append(KeyBound(span.column, None, None, or_null=True))
        else:
            bounds.append(KeyBound(span.column, span.low, span.high, or_null=span.has_null))
    return tuple(bounds)


def decisive_bounds(bounds: Sequence[KeyBound]) -> tuple[KeyBound, ...]:
    """The bounds a file's statistics can prove a key absent by: integer and date ranges (a string
    statistic may be truncated); none at all when some bound keeps NULL (NULL keys match NULL-safe)."""
    if any(b.or_null for b in bounds):
        return ()
    return tuple(b for b in bounds if isinstance(b.low, int | datetime.date) and not isinstance(b.low, bool))


def misses_every_file(bounds: Sequence[KeyBound], files: Sequence[FileRanges]) -> bool:
    """Whether no target file can hold a key of the batch: each file has a key column whose
    [min, max] lies wholly outside the batch's bound. Then a MERGE would only insert, and an
    append is the same write without reading the target (providers that add rows under growing
    keys). Only :func:`decisive_bounds` count; a file without statistics for a column, or values
    that do not compare: not missed.
    """
    exact = decisive_bounds(bounds)
    if not exact:
        return False

    def outside(file: FileRanges, bound: KeyBound) -> bool:
        extremes = file.get(bound.column)
        if extremes is None:
            return False
        low, high = extremes
        try:
            return bool(high < bound.low or low > bound.high)  # type: ignore[operator]
        except TypeError:
            return False

    return all(any(outside(file, bound) for bound in exact) for file in files)
