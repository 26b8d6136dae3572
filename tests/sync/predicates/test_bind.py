"""Binding user predicates to a schema: typed literals, and errors that say what to fix."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.predicates import (
    TRUE,
    And,
    CmpOp,
    Comparison,
    In,
    IsNotNull,
    IsNull,
    Like,
    Predicate,
    Ref,
    bind,
    columns_referenced,
    parse_where,
)
from sharesync.sync.protocol.wire import StructType

SCHEMA = StructType.model_validate(
    {
        "fields": [
            {"name": "Region", "type": "string"},
            {"name": "qty", "type": "integer"},
            {"name": "tiny", "type": "byte"},
            {"name": "big", "type": "long"},
            {"name": "price", "type": "double"},
            {"name": "ratio", "type": "float"},
            {"name": "amount", "type": "decimal(10,2)"},
            {"name": "active", "type": "boolean"},
            {"name": "day", "type": "date"},
            {"name": "at", "type": "timestamp"},
            {"name": "local", "type": "timestamp_ntz"},
            {"name": "blob", "type": "binary"},
            {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": True}},
            {"name": "addr", "type": {"type": "struct", "fields": []}},
        ]
    }
)


def value_of(col: str, val: Any, op: str = "eq") -> Any:
    expr = bind([{"col": col, "op": op, "val": val}], SCHEMA)
    assert isinstance(expr, Comparison)
    return expr.value


@pytest.mark.parametrize(
    ("col", "val", "expected"),
    [
        ("qty", 3, 3),
        ("qty", 3.0, 3),  # a whole float is a whole number
        ("big", 2**62, 2**62),
        ("price", 2, 2.0),
        ("price", 2.5, 2.5),
        ("price", math.inf, math.inf),
        ("ratio", 0.1, 0.10000000149011612),  # the float32 the column can hold
        ("amount", 0.1, Decimal("0.1")),  # the decimal the user wrote, not the binary float
        ("amount", "12.345", Decimal("12.345")),
        ("amount", 7, Decimal(7)),
        ("amount", "1E+3", Decimal(1000)),
        ("region", "EU", "EU"),
        ("active", False, False),
        ("day", "2024-01-31", date(2024, 1, 31)),
        ("day", date(2024, 1, 31), date(2024, 1, 31)),  # YAML reads unquoted dates as dates
        ("at", "2024-01-31T12:00:00Z", datetime(2024, 1, 31, 12, tzinfo=UTC)),
        ("at", "2024-01-31T14:00:00+02:00", datetime(2024, 1, 31, 12, tzinfo=UTC)),
        ("at", "2024-01-31 12:00:00", datetime(2024, 1, 31, 12, tzinfo=UTC)),  # naive means UTC
        ("at", "2024-01-31", datetime(2024, 1, 31, tzinfo=UTC)),
        ("at", datetime(2024, 1, 31, 12), datetime(2024, 1, 31, 12, tzinfo=UTC)),
        ("at", "2024-01-31T12:00:00.123456Z", datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=UTC)),
        ("local", "2024-01-31T12:00:00", datetime(2024, 1, 31, 12)),
    ],
)
def test_literals_are_typed_by_column(col: str, val: Any, expected: Any) -> None:
    value = value_of(col, val)
    assert value == expected and type(value) is type(expected)
    if isinstance(expected, datetime):
        assert value.tzinfo == expected.tzinfo


def test_tree_shape_and_resolved_names() -> None:
    expr = bind(
        [
            {"col": "REGION", "op": "in", "val": ["EU", "US", "EU"]},
            {"col": "qty", "op": "gte", "val": 3},
            {"col": "region", "op": "ilike", "val": "e%"},
            {"col": "day", "op": "is_null"},
            {"col": "day", "op": "is_not_null", "val": None},
        ],
        SCHEMA,
    )
    region, day = Ref("Region", "string"), Ref("day", "date")
    assert expr == And(
        (
            In(region, ("EU", "US")),  # duplicates dropped
            Comparison(Ref("qty", "integer"), CmpOp.GTE, 3),
            Like(region, "e%", case_insensitive=True),
            IsNull(day),
            IsNotNull(day),
        )
    )
    assert columns_referenced(expr) == {"Region", "qty", "day"}


def test_no_predicates_is_always_true() -> None:
    assert bind([], SCHEMA) == TRUE == parse_where([], SCHEMA)


def test_accepts_models_from_the_config() -> None:
    predicate = Predicate(col="qty", op="lt", val=5)
    assert bind([predicate], SCHEMA) == Comparison(Ref("qty", "integer"), CmpOp.LT, 5)


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        # unknown column: names it and lists the real ones
        ({"col": "regoin", "op": "eq", "val": "EU"}, "no column 'regoin' in the table; available columns: Region, qty"),
        # unknown op and shapes come from the model
        ({"col": "qty", "op": "between", "val": [1, 2]}, "'op': Input should be 'eq', 'neq'"),
        ({"col": "qty", "op": "in", "val": []}, "op 'in' needs 'val' to be a non-empty list"),
        ({"col": "qty", "op": "eq"}, "needs a 'val'; to match nulls use op 'is_null'"),
        ({"col": "qty", "op": "is_null", "val": 3}, "takes no 'val'"),
        ({"col": "qty", "op": "eq", "val": {"a": 1}}, "needs a scalar 'val'"),
        # wrong value type for the column
        ({"col": "qty", "op": "eq", "val": "3"}, "column 'qty' is integer, so 'val' must be a whole number"),
        ({"col": "qty", "op": "eq", "val": 2.5}, "must be a whole number"),
        ({"col": "qty", "op": "eq", "val": True}, "must be a whole number"),
        ({"col": "qty", "op": "in", "val": [1, "two"]}, "got 'two'"),
        ({"col": "tiny", "op": "lt", "val": 300}, "column 'tiny' is byte, which holds -128..127; 300 is out of range"),
        ({"col": "price", "op": "gt", "val": "cheap"}, "column 'price' is double, so 'val' must be a number"),
        ({"col": "price", "op": "gt", "val": math.nan}, "NaN is not a usable filter value"),
        ({"col": "ratio", "op": "gt", "val": 1e300}, "outside the float range"),
        ({"col": "amount", "op": "eq", "val": "lots"}, "column 'amount' is decimal(10,2), so 'val' must be a number"),
        ({"col": "amount", "op": "eq", "val": "1" * 40}, "more than 38 digits"),
        (
            {"col": "region", "op": "eq", "val": 7},
            "column 'Region' is string, so 'val' must be a string; quote it: '7'",
        ),
        ({"col": "active", "op": "eq", "val": "yes"}, "must be true or false"),
        ({"col": "active", "op": "eq", "val": 1}, "must be true or false"),
        ({"col": "day", "op": "eq", "val": "31/01/2024"}, "must be a date like '2024-01-31'"),
        ({"col": "day", "op": "eq", "val": "2024-01-31T00:00:00"}, "must be a date like"),
        ({"col": "day", "op": "eq", "val": 20240131}, "must be a date like"),
        ({"col": "at", "op": "gt", "val": "yesterday"}, "must be an ISO-8601 timestamp like '2024-01-31T12:00:00Z'"),
        ({"col": "at", "op": "gt", "val": 1700000000000}, "must be an ISO-8601 timestamp"),
        ({"col": "local", "op": "gt", "val": "2024-01-31T12:00:00Z"}, "has a time zone offset"),
        # like/ilike only on strings, and only with escapes every engine reads alike
        ({"col": "qty", "op": "like", "val": "1%"}, "'like' works on string columns only, and 'qty' is integer"),
        ({"col": "day", "op": "ilike", "val": "2024%"}, "'ilike' works on string columns only"),
        ({"col": "region", "op": "like", "val": "50\\"}, "a backslash must be followed by %, _ or another backslash"),
        ({"col": "region", "op": "like", "val": "\\d"}, "a backslash must be followed by"),
        # unsupported column types
        ({"col": "tags", "op": "is_null"}, "column 'tags' has type array, which filters do not support"),
        ({"col": "addr", "op": "eq", "val": "x"}, "has type struct"),
        ({"col": "blob", "op": "eq", "val": "x"}, "has type binary"),
    ],
)
def test_errors_name_the_predicate_the_problem_and_the_fix(predicate: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        bind([{"col": "region", "op": "is_not_null"}, predicate], SCHEMA, table="sales")
    text = str(caught.value)
    assert text.startswith(f'table \'sales\': where[1] {{"col": "{predicate["col"]}"')
    assert message in text


def test_valid_escapes_bind() -> None:
    assert isinstance(bind([{"col": "region", "op": "like", "val": "100\\%\\_\\\\"}], SCHEMA), Like)
