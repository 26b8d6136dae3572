"""Hypothesis strategies shared by the predicate property tests: one table schema with a
column of every supported kind, rows with nulls (and NaN, -0.0, ±inf for floats), user
predicates bound through ``bind`` and arbitrary AND/OR/NOT trees over them."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from sharesync.sync.predicates import Expr, Not, and_, bind, or_
from sharesync.sync.predicates.values import to_float32
from sharesync.sync.protocol.wire import StructType

COLUMNS: dict[str, str] = {
    "i": "integer",
    "d": "double",
    "f": "float",
    "dec": "decimal(10,2)",
    "s": "string",
    "b": "boolean",
    "dt": "date",
    "ts": "timestamp",
    "ntz": "timestamp_ntz",
}
# Columns that only hand-written tests use (no cells are generated for them).
EXTRA_COLUMNS: dict[str, str] = {"big": "decimal(38,2)"}
SCHEMA = StructType.model_validate(
    {"fields": [{"name": n, "type": t} for n, t in {**COLUMNS, **EXTRA_COLUMNS}.items()]}
)
ARROW_TYPES: dict[str, pa.DataType] = {
    "i": pa.int32(),
    "d": pa.float64(),
    "f": pa.float32(),
    "dec": pa.decimal128(10, 2),
    "s": pa.string(),
    "b": pa.bool_(),
    "dt": pa.date32(),
    "ts": pa.timestamp("us", tz="UTC"),
    "ntz": pa.timestamp("us"),
}

# Pattern characters, case pairs with simple case mappings, a newline (LIKE's % spans it),
# a quote, and a character above U+FFFF (it sorts above Delta's old U+FFFF tie-breaker).
ALPHABET = "aAbé É%_\\\n'😀"
PATTERN_TOKENS = ["a", "A", "b", "é", "É", "😀", "\n", "'", "%", "_", "\\%", "\\_", "\\\\"]
BASE_TIME = datetime(2021, 1, 1, 0, 0, 0)
_SPECIAL_FLOATS = [math.nan, -0.0, 0.0, 1.5, -1.5, math.inf, -math.inf]  # hypothesis favours the first

micros = st.integers(0, 4000).map(lambda n: BASE_TIME + timedelta(microseconds=n))

CELLS: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-3, 3),
    "d": st.one_of(st.sampled_from(_SPECIAL_FLOATS), st.floats(-4, 4)),
    "f": st.one_of(st.sampled_from([*_SPECIAL_FLOATS, to_float32(0.1)]), st.floats(-4, 4, width=32)),
    "dec": st.decimals(min_value=-3, max_value=3, places=2),
    "s": st.text(ALPHABET, max_size=4),
    "b": st.booleans(),
    "dt": st.dates(date(2021, 1, 1), date(2021, 1, 6)),
    "ts": micros.map(lambda m: m.replace(tzinfo=UTC)),
    "ntz": micros,
}

_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-4, 4),
    "d": st.one_of(st.sampled_from([0.0, -0.0, 1.5, math.inf, -math.inf]), st.floats(-4, 4), st.integers(-4, 4)),
    "f": st.one_of(st.sampled_from([0.1, -0.0, 1.5, math.inf]), st.floats(-4, 4, width=32)),
    "dec": st.one_of(
        st.decimals(min_value=-3, max_value=3, places=2).map(str),
        st.decimals(min_value=-3, max_value=3, places=3).map(str),
        st.integers(-3, 3),
    ),
    "s": st.text(ALPHABET, max_size=3),
    "b": st.booleans(),
    "dt": st.dates(date(2020, 12, 31), date(2021, 1, 7)).map(date.isoformat),
    "ts": st.one_of(
        micros.map(lambda m: m.isoformat() + "Z"),
        micros.map(lambda m: (m + timedelta(hours=2)).isoformat() + "+02:00"),
    ),
    "ntz": micros.map(datetime.isoformat),
}
_PATTERNS = st.lists(st.sampled_from(PATTERN_TOKENS), max_size=4).map("".join)


NULLABLE_CELLS = {c: st.one_of(st.none(), strategy) for c, strategy in CELLS.items()}
ROW = st.fixed_dictionaries(NULLABLE_CELLS)


def cells(column: str) -> st.SearchStrategy[Any]:
    """A cell of the column, sometimes null (strategies are built once: building is slow)."""
    return NULLABLE_CELLS[column]


@st.composite
def predicates(draw: st.DrawFn, columns: tuple[str, ...] = tuple(COLUMNS)) -> dict[str, Any]:
    """A raw user predicate that binds (value of the right type for its column)."""
    column = draw(st.sampled_from(columns))
    ops = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "is_null", "is_not_null"]
    if COLUMNS[column] == "string":
        ops += ["like", "ilike"]
    op = draw(st.sampled_from(ops))
    if op in ("is_null", "is_not_null"):
        return {"col": column, "op": op}
    if op in ("like", "ilike"):
        return {"col": column, "op": op, "val": draw(_PATTERNS)}
    if op == "in":
        return {"col": column, "op": op, "val": draw(st.lists(_VALUES[column], min_size=1, max_size=3))}
    return {"col": column, "op": op, "val": draw(_VALUES[column])}


def leaves(columns: tuple[str, ...] = tuple(COLUMNS)) -> st.SearchStrategy[Expr]:
    return predicates(columns).map(lambda p: bind([p], SCHEMA))


def exprs(columns: tuple[str, ...] = tuple(COLUMNS)) -> st.SearchStrategy[Expr]:
    """Arbitrary trees: AND/OR of 2–3 operands and NOT, over bound leaves."""
    return st.recursive(
        leaves(columns),
        lambda children: st.one_of(
            st.lists(children, min_size=2, max_size=3).map(lambda xs: and_(*xs)),
            st.lists(children, min_size=2, max_size=3).map(lambda xs: or_(*xs)),
            children.map(Not),
        ),
        max_leaves=6,
    )


def rows(min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(ROW, min_size=min_size, max_size=max_size)


def arrow_table(table_rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as an Arrow table with a ``__row`` index column."""
    data = {c: pa.array([r[c] for r in table_rows], ARROW_TYPES[c]) for c in COLUMNS}
    return pa.table({"__row": pa.array(range(len(table_rows)), pa.int64()), **data})
