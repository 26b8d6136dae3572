"""The reference evaluator (SQL 3VL, Spark's NaN order), Arrow filtering against it, and
the NOT push-down rewrite."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharesync.sync.predicates import (
    FALSE,
    TRUE,
    Expr,
    Not,
    and_,
    bind,
    evaluate,
    not_,
    or_,
    rewrite_not,
    to_arrow,
)

from .strategies import COLUMNS, SCHEMA, arrow_table, exprs, leaves, rows

NULL_ROW = dict.fromkeys(COLUMNS)


def leaf(col: str, op: str, val: Any = None) -> Expr:
    predicate = {"col": col, "op": op} if val is None else {"col": col, "op": op, "val": val}
    return bind([predicate], SCHEMA)


def row(**cells: Any) -> dict[str, Any]:
    return {**NULL_ROW, **cells}


@pytest.mark.parametrize(
    ("expr", "cells", "expected"),
    [
        # comparisons with null are unknown; neq does not match nulls
        (leaf("i", "eq", 1), {}, None),
        (leaf("i", "neq", 1), {}, None),
        (leaf("i", "neq", 1), {"i": 2}, True),
        (leaf("i", "in", [1, 2]), {}, None),
        (leaf("i", "in", [1, 2]), {"i": 3}, False),
        (leaf("s", "like", "a%"), {}, None),
        (leaf("i", "is_null"), {}, True),
        (leaf("i", "is_not_null"), {}, False),
        # NOT of unknown is unknown; Kleene AND/OR
        (Not(leaf("i", "eq", 1)), {}, None),
        (and_(leaf("i", "eq", 1), leaf("b", "eq", True)), {"b": False}, False),
        (and_(leaf("i", "eq", 1), leaf("b", "eq", True)), {"b": True}, None),
        (or_(leaf("i", "eq", 1), leaf("b", "eq", True)), {"b": True}, True),
        (or_(leaf("i", "eq", 1), leaf("b", "eq", True)), {"b": False}, None),
        # Spark's float order: NaN above everything (also +inf), equal to itself only; -0.0 = 0.0
        (leaf("d", "gt", math.inf), {"d": math.nan}, True),
        (leaf("d", "lte", 5), {"d": math.nan}, False),
        (leaf("d", "neq", 5), {"d": math.nan}, True),
        (leaf("d", "eq", 0.0), {"d": -0.0}, True),
        (leaf("d", "lt", 0.0), {"d": -0.0}, False),
        # a float column compares with the float32 nearest to the literal
        (leaf("f", "eq", 0.1), {"f": 0.10000000149011612}, True),
        # LIKE: % spans newlines, escapes, ILIKE is lower() on both sides
        (leaf("s", "like", "a%b"), {"s": "a\nb"}, True),
        (leaf("s", "like", "a\\%"), {"s": "a%"}, True),
        (leaf("s", "like", "a\\%"), {"s": "ab"}, False),
        (leaf("s", "like", "a_"), {"s": "a"}, False),
        (leaf("s", "ilike", "É%"), {"s": "école"}, True),
        (leaf("s", "like", "É%"), {"s": "école"}, False),
        # a naive timestamp cell is a UTC instant
        (leaf("ts", "eq", "2021-01-01T02:00:00+02:00"), {"ts": datetime(2021, 1, 1)}, True),
        (TRUE, {}, True),
        (FALSE, {}, False),
    ],
)
def test_evaluate(expr: Expr, cells: dict[str, Any], expected: bool | None) -> None:
    assert evaluate(expr, row(**cells)) is expected


def test_constant_folding_follows_3vl() -> None:
    unknown = leaf("i", "eq", 1)
    assert and_(unknown, FALSE) == FALSE and or_(unknown, TRUE) == TRUE
    assert and_(unknown, TRUE) == unknown and or_(unknown, FALSE) == unknown
    assert not_(not_(unknown)) == unknown and not_(TRUE) == FALSE


def test_rewrite_not_pushes_negation_to_leaves() -> None:
    expr = Not(and_(leaf("i", "in", [1, 2]), Not(leaf("s", "like", "a%")), leaf("d", "lt", 1)))
    assert rewrite_not(expr) == or_(
        and_(leaf("i", "neq", 1), leaf("i", "neq", 2)),
        leaf("s", "like", "a%"),
        leaf("d", "gte", 1),
    )


def _selected(table: pa.Table, expr: Expr) -> list[int]:
    result: list[int] = table.filter(to_arrow(expr))["__row"].to_pylist()
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=exprs(), table_rows=rows())
def test_arrow_filter_equals_evaluate(expr: Expr, table_rows: list[dict[str, Any]]) -> None:
    expected = [i for i, r in enumerate(table_rows) if evaluate(expr, r) is True]
    assert _selected(arrow_table(table_rows), expr) == expected


@settings(max_examples=400, deadline=None)
@given(expr=leaves(), table_rows=rows(min_size=4, max_size=12))
def test_arrow_filter_equals_evaluate_per_leaf(expr: Expr, table_rows: list[dict[str, Any]]) -> None:
    """Leaf semantics (NaN order, null handling, LIKE) with more rows per example."""
    expected = [i for i, r in enumerate(table_rows) if evaluate(expr, r) is True]
    assert _selected(arrow_table(table_rows), expr) == expected


@settings(max_examples=300, deadline=None)
@given(expr=exprs(), table_rows=rows(min_size=1))
def test_rewrite_not_keeps_meaning(expr: Expr, table_rows: list[dict[str, Any]]) -> None:
    rewritten = rewrite_not(expr)
    for r in table_rows:
        assert evaluate(rewritten, r) is evaluate(expr, r)


@given(st.data())
@settings(max_examples=50, deadline=None)
def test_rewrite_not_leaves_no_not_above_a_leaf(data: st.DataObject) -> None:
    def nots_only_on_like(e: Expr) -> bool:
        from sharesync.sync.predicates import And, Like, Or

        match e:
            case Not(operand):
                return isinstance(operand, Like)
            case And(operands) | Or(operands):
                return all(nots_only_on_like(o) for o in operands)
        return True

    assert nots_only_on_like(rewrite_not(data.draw(exprs())))


def test_arrow_timestamp_stored_without_time_zone() -> None:
    """INT96 timestamps read back as naive UTC: literals follow the file's Arrow type."""
    table = pa.table({"ts": pa.array([datetime(2021, 1, 1, 1), datetime(2021, 1, 1, 3)], pa.timestamp("ns"))})
    expr = leaf("ts", "gt", "2021-01-01T04:00:00+02:00")  # 02:00 UTC
    assert table.filter(to_arrow(expr, table.schema))["ts"].to_pylist() == [datetime(2021, 1, 1, 3)]
    aware = pa.table({"ts": pa.array([datetime(2021, 1, 1, 3, tzinfo=UTC)], pa.timestamp("us", tz="UTC"))})
    assert aware.filter(to_arrow(expr, aware.schema)).num_rows == 1


def test_arrow_expression_is_an_expression() -> None:
    assert isinstance(to_arrow(leaf("i", "eq", 1)), pc.Expression)
