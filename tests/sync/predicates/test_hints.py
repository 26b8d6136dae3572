"""Server hints: the spec's own JSON examples (fixtures copied from
``shared/spec/delta-sharing-filtering.txt``), the widening rules, and SQL literal quoting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from sharesync.sync.predicates import Expr, Not, and_, bind, evaluate, or_, rewrite_not, to_json_hints, to_sql_hints
from sharesync.sync.protocol.wire import StructType

from .strategies import SCHEMA as GENERATED_SCHEMA
from .strategies import exprs, rows

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA = StructType.model_validate(
    {
        "fields": [
            {"name": n, "type": t}
            for n, t in {
                "hireDate": "date",
                "date": "date",
                "id": "integer",
                "email": "string",
                "country": "string",
                "status": "string",
                "priority": "string",
                "balance": "double",
                "age": "integer",
                "ratio": "float",
                "amount": "decimal(10,2)",
                "flag": "boolean",
                "ts": "timestamp",
                "ntz": "timestamp_ntz",
                "big": "long",
                "note": "string",
                "odd name": "string",
            }.items()
        ]
    }
)
PARTITIONS = [f.name for f in SCHEMA.fields if f.name != "note"]  # "note" stands for a data column


def where(*predicates: dict[str, Any]) -> Expr:
    return bind(list(predicates), SCHEMA)


def p(col: str, op: str, val: Any = None) -> dict[str, Any]:
    return {"col": col, "op": op} if val is None else {"col": col, "op": op, "val": val}


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def hints(expr: Expr, partitions: list[str] = PARTITIONS) -> Any:
    text = to_json_hints(expr, partitions)
    return None if text is None else json.loads(text)


# ---------------------------------------------------------------- the spec's examples

SPEC_EXAMPLES = {
    "example1_simple_equality": where(p("hiredate", "eq", "2021-04-29")),
    "example2_compound_and": where(p("hireDate", "eq", "2021-04-29"), p("id", "lt", 25)),
    "example3_not_null": where(p("id", "is_not_null")),
    "example4_date_range_or": or_(
        where(p("date", "gte", "2021-01-01"), p("date", "lt", "2021-04-01")),
        where(p("date", "gte", "2021-10-01"), p("date", "lt", "2022-01-01")),
    ),
    "op_isNull": where(p("email", "is_null")),
    "op_equal": where(p("country", "eq", "US")),
    "op_lessThan": where(p("age", "lt", 65)),
    "op_and": where(p("status", "eq", "active"), p("balance", "gt", 0)),
    "op_or": where(p("priority", "in", ["high", "urgent"])),
}


@pytest.mark.parametrize("name", sorted(SPEC_EXAMPLES))
def test_json_hints_match_the_spec_examples(name: str) -> None:
    assert hints(SPEC_EXAMPLES[name]) == fixture(name)


def test_request_body_strings_are_the_specs_exactly() -> None:
    """Compact JSON with the spec's key order: the request example's string, byte for byte."""
    expr = where(p("date", "eq", "2021-04-29"), p("id", "lt", 25))
    assert to_json_hints(expr, PARTITIONS) == fixture("request_format")["jsonPredicateHints"]
    assert to_json_hints(where(p("status", "eq", "active")), PARTITIONS) == fixture("limit_hint")["jsonPredicateHints"]


def test_sql_hints_match_the_spec_example() -> None:
    expr = where(p("date", "gte", "2021-01-01"), p("date", "lte", "2021-01-31"), p("country", "eq", "US"))
    assert to_sql_hints(expr) == fixture("sql_request_format")["predicateHints"]


# ---------------------------------------------------------------- widening rules

EQ_US = {"op": "equal", "children": [{"op": "column", "name": "country", "valueType": "string"}, {"op": "literal", "value": "US", "valueType": "string"}]}  # fmt: skip


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        # conjuncts on data columns are dropped; the rest stays
        (where(p("country", "eq", "US"), p("note", "eq", "x")), EQ_US),
        (where(p("note", "eq", "x")), None),
        # LIKE has no JSON op: dropped as a conjunct, and it takes a whole OR with it
        (where(p("country", "eq", "US"), p("country", "like", "U%")), EQ_US),
        (or_(where(p("country", "eq", "US")), where(p("note", "eq", "x"))), None),
        (or_(where(p("country", "eq", "US")), where(p("country", "like", "U%"))), None),
        # NOT LIKE cannot be narrowed safely: dropped
        (Not(where(p("country", "like", "U%"))), None),
        # NOT over an AND with a data column: pushed down first, then the OR has a data branch
        (Not(where(p("country", "eq", "US"), p("note", "eq", "x"))), None),
        # NOT over an AND of partition columns: De Morgan, comparisons flip
        (
            Not(where(p("id", "gt", 1), p("country", "eq", "US"))),
            {"op": "or", "children": [
                {"op": "lessThanOrEqual", "children": [{"op": "column", "name": "id", "valueType": "int"}, {"op": "literal", "value": "1", "valueType": "int"}]},
                {"op": "not", "children": [EQ_US]},
            ]},
        ),
        # neq → not(equal)
        (where(p("country", "neq", "US")), {"op": "not", "children": [EQ_US]}),
        # a single-valued IN is an equal
        (where(p("country", "in", ["US"])), EQ_US),
        # NOT IN → AND of not(equal)
        (Not(where(p("country", "in", ["US", "CA"]))), {"op": "and", "children": [
            {"op": "not", "children": [EQ_US]},
            {"op": "not", "children": [{"op": "equal", "children": [{"op": "column", "name": "country", "valueType": "string"}, {"op": "literal", "value": "CA", "valueType": "string"}]}]},
        ]}),
        # types without a spec valueType (decimal, timestamp_ntz) or literal (inf) are dropped
        (where(p("amount", "eq", 1.5)), None),
        (where(p("ntz", "eq", "2021-01-01T00:00:00")), None),
        (where(p("balance", "lt", float("inf"))), None),
        # -0.0 = 0.0 in Spark, not under Java's Double.compare: no =, >=, <= against a zero
        (where(p("balance", "eq", 0)), None),
        (where(p("balance", "gte", -0.0)), None),
        (where(p("ratio", "in", [1.5, 0.0])), None),
        (where(p("balance", "neq", 0)), {"op": "not", "children": [{"op": "equal", "children": [{"op": "column", "name": "balance", "valueType": "double"}, {"op": "literal", "value": "0", "valueType": "double"}]}]}),
    ],
)  # fmt: skip
def test_json_hints_only_widen(expr: Expr, expected: Any) -> None:
    assert hints(expr) == expected


@pytest.mark.parametrize(
    ("predicate", "literal"),
    [
        (p("flag", "eq", True), {"value": "true", "valueType": "bool"}),
        (p("big", "eq", 2**40), {"value": "1099511627776", "valueType": "long"}),
        (p("ratio", "eq", 0.1), {"value": "0.1", "valueType": "float"}),  # float32 0.1 spelled short
        (p("balance", "eq", 2.5), {"value": "2.5", "valueType": "double"}),
        (p("ts", "eq", "2022-01-01T02:00:00+02:00"), {"value": "2022-01-01T00:00:00Z", "valueType": "timestamp"}),
        (p("ts", "eq", "2022-01-01T00:00:00.25Z"), {"value": "2022-01-01T00:00:00.25Z", "valueType": "timestamp"}),
    ],
)
def test_json_literal_forms(predicate: dict[str, Any], literal: dict[str, str]) -> None:
    tree = hints(where(predicate))
    assert tree["children"][1] == {"op": "literal", **literal}


def test_partition_columns_match_case_insensitively() -> None:
    assert hints(where(p("country", "eq", "US")), ["COUNTRY"]) == EQ_US
    assert hints(where(p("country", "eq", "US")), []) is None


@settings(max_examples=200, deadline=None)
@given(expr=exprs(), table_rows=rows(min_size=1))
def test_json_hints_never_exclude_a_matching_row(expr: Expr, table_rows: list[dict[str, Any]]) -> None:
    """Whatever the hint keeps must include every row the filter keeps (hint is implied)."""
    text = to_json_hints(expr, list(GENERATED_SCHEMA.names))
    hint = _from_json(json.loads(text)) if text else None
    for r in table_rows:
        if evaluate(expr, r) is True and hint is not None:
            assert evaluate(hint, r) is True


def _from_json(node: dict[str, Any]) -> Expr:
    """Read a JSON hint back into a tree (test helper: the server's view of the hint)."""
    op = node["op"]
    if op in ("and", "or"):
        children = [_from_json(c) for c in node["children"]]
        return and_(*children) if op == "and" else or_(*children)
    if op == "not":
        return Not(_from_json(node["children"][0]))
    column = node["children"][0]["name"]
    if op == "isNull":
        return bind([{"col": column, "op": "is_null"}], GENERATED_SCHEMA)
    text = node["children"][1]["value"]
    kind = node["children"][1]["valueType"]
    value: Any = {"int": int, "long": int, "float": float, "double": float, "bool": lambda t: t == "true"}.get(
        kind, lambda t: t
    )(text)
    ops = {"equal": "eq", "lessThan": "lt", "lessThanOrEqual": "lte", "greaterThan": "gt", "greaterThanOrEqual": "gte"}
    return bind([{"col": column, "op": ops[op], "val": value}], GENERATED_SCHEMA)


# ---------------------------------------------------------------- SQL hints


@pytest.mark.parametrize(
    ("predicate", "sql"),
    [
        (p("country", "eq", "O'Brien"), "country = 'O\\'Brien'"),
        (p("country", "neq", "it's 'quoted'"), "country <> 'it\\'s \\'quoted\\''"),
        (p("country", "eq", "C:\\temp"), None),  # backslash: SQL dialects disagree → no hint
        (p("odd name", "gte", "x"), "`odd name` >= 'x'"),
        (p("id", "gt", -3), "id > -3"),
        (p("balance", "lte", 0.5), "balance <= 0.5"),
        (p("balance", "lte", 1e20), "balance <= 1e+20"),
        (p("balance", "lte", 1e-7), "balance <= 1e-07"),
        (p("ratio", "lt", 0.1), "ratio < 0.1"),
        (p("amount", "eq", "12.50"), "amount = 12.50"),
        (p("flag", "eq", False), "flag = false"),
        (p("hireDate", "lt", "2021-04-29"), "hireDate < '2021-04-29'"),
        (p("email", "is_null"), "email IS NULL"),
        (p("email", "is_not_null"), "email IS NOT NULL"),
        (p("country", "in", ["US"]), "country = 'US'"),
        (p("country", "in", ["US", "CA"]), None),  # spec: no IN
        (p("country", "like", "U%"), None),  # spec: no LIKE
        (p("ts", "gt", "2021-01-01T00:00:00Z"), None),  # text comparison risk (see hints.py)
        (p("balance", "gt", float("-inf")), None),
        (p("balance", "lte", 0.0), None),  # signed zeros (see hints._zero_sign_matters)
        (p("balance", "lt", 0.0), "balance < 0"),
    ],
)
def test_sql_hint_forms(predicate: dict[str, Any], sql: str | None) -> None:
    assert to_sql_hints(where(predicate)) == ([] if sql is None else [sql])


def test_sql_hints_one_per_expressible_conjunct() -> None:
    expr = and_(
        where(p("id", "gt", 1), p("country", "like", "U%")),
        or_(where(p("id", "eq", 1)), where(p("id", "eq", 2))),
        Not(where(p("id", "lt", 5))),
    )
    assert to_sql_hints(expr) == ["id > 1", "id >= 5"]
    assert rewrite_not(Not(where(p("id", "lt", 5)))) == where(p("id", "gte", 5))
