"""File pruning: hand-picked cases for each rule, then soundness as a property — whatever
the stats look like (true, truncated, NaN-hiding, NaN-showing, partly or wholly missing),
a file holding a matching row is never pruned."""

from __future__ import annotations

import functools
import json
import math
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharesync.sync.predicates import Expr, Not, bind, evaluate, may_match, or_
from sharesync.sync.predicates.evaluate import compare
from sharesync.sync.predicates.values import float32_text
from sharesync.sync.protocol.wire import FileStats, StructType, parse_stats

from .strategies import COLUMNS, ROW, SCHEMA, cells, exprs, leaves


def leaf(col: str, op: str, val: Any = None, schema: StructType = SCHEMA) -> Expr:
    predicate = {"col": col, "op": op} if val is None else {"col": col, "op": op, "val": val}
    return bind([predicate], schema)


def stats(num_records: int | None = 10, **columns: tuple[Any, Any, int | None]) -> FileStats:
    """FileStats through the real JSON parser; columns map to (min, max, nullCount)."""
    body: dict[str, Any] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
    if num_records is not None:
        body["numRecords"] = num_records
    for name, (low, high, nulls) in columns.items():
        for key, value in (("minValues", low), ("maxValues", high), ("nullCount", nulls)):
            if value is not None:
                body[key][name] = value
    parsed = parse_stats(json.dumps(body))
    assert parsed is not None
    return parsed


def prunes(expr: Expr, file_stats: FileStats | None, partition_values: dict[str, Any] | None = None) -> bool:
    return not may_match(expr, file_stats, partition_values or {}, SCHEMA)


# ---------------------------------------------------------------- rules, one by one


@pytest.mark.parametrize(
    ("expr", "file_stats", "pruned"),
    [
        # integers: plain bounds
        (leaf("i", "gt", 10), stats(i=(1, 10, 0)), True),
        (leaf("i", "gte", 10), stats(i=(1, 10, 0)), False),
        (leaf("i", "lt", 1), stats(i=(1, 10, 0)), True),
        (leaf("i", "eq", 11), stats(i=(1, 10, 0)), True),
        (leaf("i", "eq", 5), stats(i=(1, 10, 0)), False),
        (leaf("i", "in", [0, 11]), stats(i=(1, 10, 0)), True),
        (leaf("i", "in", [0, 5]), stats(i=(1, 10, 0)), False),
        # neq: prunable only when every non-null value equals the literal
        (leaf("i", "neq", 5), stats(i=(5, 5, 0)), True),
        (leaf("i", "neq", 5), stats(i=(5, 5, 3)), True),  # nulls never satisfy neq
        (leaf("i", "neq", 5), stats(i=(5, 6, 0)), False),
        (Not(leaf("i", "in", [5])), stats(i=(5, 5, 0)), True),
        (Not(leaf("i", "gt", 3)), stats(i=(5, 9, 0)), True),  # NOT(x > 3) is x <= 3
        (Not(leaf("i", "gt", 3)), stats(i=(1, 9, 0)), False),
        # null counts
        (leaf("i", "is_null"), stats(i=(1, 10, 0)), True),
        (leaf("i", "is_null"), stats(i=(1, 10, 1)), False),
        (leaf("i", "is_not_null"), stats(num_records=10, i=(None, None, 10)), True),
        (leaf("i", "eq", 1), stats(num_records=10, i=(None, None, 10)), True),  # all null
        (leaf("i", "neq", 1), stats(num_records=10, i=(None, None, 10)), True),
        (Not(leaf("i", "eq", 1)), stats(num_records=10, i=(None, None, 10)), True),
        (leaf("i", "is_null"), stats(num_records=10, i=(None, None, 10)), False),
        (leaf("i", "is_null"), stats(num_records=None, i=(1, 2, 0)), True),
        (leaf("i", "is_not_null"), stats(num_records=None, i=(None, None, 5)), False),  # total unknown
        # missing or odd stats never prune
        (leaf("i", "gt", 10), None, False),
        (leaf("i", "gt", 10), stats(i=(1, None, 0)), False),
        (leaf("i", "gt", 10), stats(i=(1, "ten", 0)), False),
        (leaf("i", "gt", 10), stats(i=(20, 1, 0)), False),  # min > max: inconsistent
        (leaf("i", "is_not_null"), stats(num_records=5, i=(None, None, 7)), False),  # nullCount > numRecords
        (leaf("i", "eq", 1), stats(num_records=0), True),  # empty file
        # float/double: NaN and infinite bounds are no bounds; NaN rows satisfy > >= <>
        (leaf("d", "eq", 5.0), stats(d=(1.0, 2.0, 0)), True),
        (leaf("d", "lt", 1.0), stats(d=(1.0, 2.0, 0)), True),
        (leaf("d", "gt", 5.0), stats(d=(1.0, 2.0, 0)), False),  # a NaN row may hide behind max 2.0
        (leaf("d", "neq", 1.0), stats(d=(1.0, 1.0, 0)), False),
        (leaf("d", "lt", 1.0), stats(d=("NaN", "NaN", 0)), False),
        (leaf("d", "lt", 1.0), stats(d=(float("nan"), 2.0, 0)), False),
        (leaf("d", "eq", 5.0), stats(d=(1.0, float("inf"), 0)), False),
        (leaf("d", "eq", 0.0), stats(d=(-0.0, -0.0, 0)), False),  # -0.0 = 0.0
        (leaf("f", "eq", 0.1), stats(f=(0.1, 0.1, 0)), False),  # float32 0.1 printed as 0.1
        # strings: min is a bound, max may be a truncated prefix
        (leaf("s", "lt", "b"), stats(s=("bar", "foo", 0)), True),
        (leaf("s", "gt", "zz"), stats(s=("a", "foo", 0)), True),
        (leaf("s", "gt", "fop"), stats(s=("a", "foo", 0)), False),  # "foo" may stand for "fooz…"
        (leaf("s", "gt", "fo"), stats(s=("a", "foo", 0)), False),
        (leaf("s", "eq", "fz"), stats(s=("a", "foo", 0)), True),
        (leaf("s", "eq", "foo"), stats(s=("foo", "foo", 0)), False),
        (leaf("s", "neq", "foo"), stats(s=("foo", "foo", 0)), False),  # max may be truncated
        # older Delta: "a😀…" truncated to "a" plus tie-breaker U+FFFF, which sorts below 😀
        (leaf("s", "gte", "a😀"), stats(s=("a", "a\uffff", 0)), False),
        (leaf("s", "gte", "b"), stats(s=("a", "a\uffff", 0)), True),
        (leaf("s", "like", "x%"), stats(s=("a", "foo", 0)), True),
        (leaf("s", "like", "a%"), stats(s=("b", "foo", 0)), True),
        (leaf("s", "like", "fo%"), stats(s=("a", "foo", 0)), False),
        (leaf("s", "like", "%x"), stats(s=("a", "foo", 0)), False),
        (leaf("s", "ilike", "x%"), stats(s=("a", "foo", 0)), False),
        # timestamps: millisecond stats widened by 1 ms (values carry microseconds)
        (
            leaf("ts", "gt", "2021-01-01T00:00:00.719500Z"),
            stats(ts=("2021-01-01T00:00:00.100Z", "2021-01-01T00:00:00.719Z", 0)),
            False,
        ),
        (
            leaf("ts", "gt", "2021-01-01T00:00:00.721Z"),
            stats(ts=("2021-01-01T00:00:00.100Z", "2021-01-01T00:00:00.719Z", 0)),
            True,
        ),
        (
            leaf("ts", "lt", "2021-01-01T00:00:00.099Z"),
            stats(ts=("2021-01-01T00:00:00.100Z", "2021-01-01T00:00:00.719Z", 0)),
            True,
        ),
        (
            leaf("ntz", "eq", "2021-01-02T00:00:00"),
            stats(ntz=("2021-01-01T00:00:00.000", "2021-01-01T00:00:00.719", 0)),
            True,
        ),
        # dates and decimals
        (leaf("dt", "lt", "2021-01-01"), stats(dt=("2021-01-01", "2021-01-31", 0)), True),
        (leaf("dt", "lte", "2021-01-01"), stats(dt=("2021-01-01", "2021-01-31", 0)), False),
        (leaf("dec", "gt", "12.34"), stats(dec=(1.5, 12.34, 0)), False),  # JSON float 12.34 is not exact
        (leaf("dec", "gt", "12.35"), stats(dec=(1.5, 12.34, 0)), True),
        # a long decimal's JSON number rounds to a float below the true max
        (leaf("big", "gt", "1234567890123456789"), stats(big=(0, 1234567890123456789.5, 0)), False),
        (leaf("big", "gt", "1234567890123458000"), stats(big=(0, 1234567890123456789.5, 0)), True),
        # OR needs every branch impossible; AND any
        (or_(leaf("i", "gt", 10), leaf("i", "lt", 1)), stats(i=(1, 10, 0)), True),
        (or_(leaf("i", "gt", 10), leaf("i", "lt", 2)), stats(i=(1, 10, 0)), False),
    ],
)
def test_stats_rules(expr: Expr, file_stats: FileStats | None, pruned: bool) -> None:
    assert prunes(expr, file_stats) is pruned


@pytest.mark.parametrize(
    ("expr", "partition_values", "pruned"),
    [
        (leaf("dt", "eq", "2021-04-29"), {"dt": "2021-04-29"}, False),
        (leaf("dt", "eq", "2021-04-29"), {"dt": "2021-04-30"}, True),
        (leaf("dt", "eq", "2021-04-29"), {"DT": "2021-04-30"}, True),  # keys are case-insensitive
        (leaf("dt", "neq", "2021-04-29"), {"dt": ""}, True),  # null partition: neq is unknown
        (leaf("dt", "neq", "2021-04-29"), {"dt": None}, True),
        (leaf("dt", "is_null"), {"dt": ""}, False),
        (leaf("dt", "is_null"), {"dt": "2021-04-29"}, True),
        (Not(leaf("s", "like", "a%")), {"s": "abc"}, True),
        (Not(leaf("s", "like", "a%")), {"s": ""}, True),  # null: NOT(unknown) is unknown
        (leaf("f", "eq", 0.1), {"f": "0.1"}, False),  # both sides are float32 0.1
        (leaf("d", "gt", 1e300), {"d": "NaN"}, False),  # NaN sorts above every number
        # timestamps: exact with a zone; zone-less text may be in the writer's zone (±14 h)
        (leaf("ts", "eq", "2021-01-01T10:00:00Z"), {"ts": "2021-01-01T10:00:00.000001Z"}, True),
        (leaf("ts", "eq", "2021-01-01T10:00:00Z"), {"ts": "2021-01-01T10:00:00Z"}, False),
        (leaf("ts", "eq", "2021-01-01T10:00:00Z"), {"ts": "2021-01-01 10:00:00.000001"}, False),
        (leaf("ts", "eq", "2021-01-01T23:00:00Z"), {"ts": "2021-01-01 10:00:00"}, False),
        (leaf("ts", "eq", "2021-01-02T00:00:01Z"), {"ts": "2021-01-01 10:00:00"}, True),
        (leaf("ts", "is_null"), {"ts": "2021-01-01 10:00:00"}, True),
        (leaf("ts", "is_null"), {"ts": ""}, False),
        (leaf("ts", "is_not_null"), {"ts": ""}, True),
        (leaf("ntz", "eq", "2021-01-01T10:00:00"), {"ntz": "2021-01-01 10:00:00.000001"}, True),
        (leaf("i", "gt", 1), {"i": "not a number"}, False),  # unreadable: keep the file
        (leaf("i", "gt", 1), {}, False),  # column absent
    ],
)
def test_partition_values(expr: Expr, partition_values: dict[str, Any], pruned: bool) -> None:
    assert prunes(expr, None, partition_values) is pruned


def test_stats_under_column_mapping_physical_names() -> None:
    schema = StructType.model_validate(
        {"fields": [{"name": "id", "type": "long", "metadata": {"delta.columnMapping.physicalName": "col-5f"}}]}
    )
    expr = leaf("id", "gt", 10, schema)
    assert not may_match(expr, stats(**{"col-5f": (1, 5, 0)}), {}, schema)
    assert may_match(expr, stats(**{"col-5f": (1, 50, 0)}), {}, schema)


# ---------------------------------------------------------------- soundness, as a property

TIE_BREAKERS = ["\uffff", "", "\U0010ffff"]


def _spark_sorted(values: list[Any]) -> list[Any]:
    return sorted(values, key=functools.cmp_to_key(compare))


def _stat_text(column: str, value: Any) -> Any:
    """A value as a Delta writer puts it in the stats JSON."""
    match COLUMNS[column]:
        case "float":
            return value if not math.isfinite(value) else float(float32_text(value))
        case "decimal(10,2)":
            return float(value)  # JSON number, read back as a binary float
        case "date":
            return value.isoformat()
        case "timestamp":
            ms = value.astimezone(UTC)
            return ms.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z"
        case "timestamp_ntz":
            return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    return value


@st.composite
def files(draw: st.DrawFn) -> tuple[list[dict[str, Any]], FileStats | None, dict[str, str | None]]:
    """Rows of one file, its stats JSON (in one of many honest or degraded forms) and its
    partition values (partition columns hold one value per file)."""
    partition_columns = draw(st.sets(st.sampled_from(list(COLUMNS)), max_size=3))
    # Delta stores an empty string partition value as null ("Partition Value Serialization").
    fixed = {c: draw(cells(c)) for c in partition_columns}
    fixed = {c: None if v == "" else v for c, v in fixed.items()}
    file_rows = [{**r, **fixed} for r in draw(st.lists(ROW, min_size=1, max_size=6))]  # no rows: no match
    size = len(file_rows)
    partition_values = {c: _partition_text(c, v, draw(st.booleans())) for c, v in fixed.items()}
    if draw(st.integers(0, 5)) == 5:  # sometimes no stats at all (0 is drawn most often)
        return file_rows, None, partition_values
    body: dict[str, Any] = {"minValues": {}, "maxValues": {}, "nullCount": {}}
    if draw(st.integers(0, 5)) != 5:
        body["numRecords"] = size
    for column in COLUMNS:
        if column in partition_columns:
            continue
        values = [r[column] for r in file_rows if r[column] is not None]
        if draw(st.integers(0, 5)) != 5:
            body["nullCount"][column] = size - len(values)
        if draw(st.integers(0, 5)) == 5:
            continue  # no bounds for this column
        nan_style = draw(st.sampled_from(["parquet", "spark", "string"]))
        if COLUMNS[column] in ("float", "double") and nan_style == "parquet":
            values = [v for v in values if not math.isnan(v)]  # NaN left out of min/max
        if not values:
            continue
        ordered = _spark_sorted(values)  # spark style: NaN is the max (and the min if all NaN)
        low, high = (_stat_text(column, v) for v in (ordered[0], ordered[-1]))
        if nan_style == "string":
            low, high = ("NaN" if isinstance(v, float) and math.isnan(v) else v for v in (low, high))
        if COLUMNS[column] == "string":
            cut = draw(st.one_of(st.integers(0, 3), st.none()))
            if cut is not None and len(high) > cut:
                high = high[:cut] + draw(st.sampled_from(TIE_BREAKERS))
            if cut is not None:
                low = low[:cut]
        body["minValues"][column], body["maxValues"][column] = low, high
    return file_rows, parse_stats(json.dumps(body)), partition_values


def _partition_text(column: str, value: Any, empty_for_null: bool) -> str | None:
    """A value as the protocol serialises partition values."""
    if value is None:
        return "" if empty_for_null else None
    match COLUMNS[column]:
        case "float":
            return float32_text(value) if math.isfinite(value) else repr(value).replace("inf", "Infinity")
        case "double":
            return repr(value).replace("inf", "Infinity")
        case "boolean":
            return "true" if value else "false"
        case "timestamp":
            return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        case "timestamp_ntz":
            return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


File = tuple[list[dict[str, Any]], FileStats | None, dict[str, str | None]]


def _check_sound(expr: Expr, file: File) -> None:
    file_rows, file_stats, partition_values = file
    if any(evaluate(expr, r) is True for r in file_rows):
        assert may_match(expr, file_stats, partition_values, SCHEMA)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=leaves(), file=files())
def test_pruning_never_drops_a_matching_file_one_predicate(expr: Expr, file: File) -> None:
    """Single predicates match often, which exercises each bound rule (NaN, truncation, ms)."""
    _check_sound(expr, file)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=exprs(), file=files())
def test_pruning_never_drops_a_matching_file(expr: Expr, file: File) -> None:
    """Whole trees: AND/OR/NOT combine the two-sided (may be TRUE / may be FALSE) analysis."""
    _check_sound(expr, file)


def test_pruning_is_not_vacuous() -> None:
    """The property above would hold for `may_match = lambda *_: True`; this does not."""
    pruned = [
        prunes(
            leaf("ts", "gt", "2021-01-02T00:00:00Z"),
            stats(ts=("2021-01-01T00:00:00.000Z", "2021-01-01T00:00:00.004Z", 0)),
        ),
        prunes(leaf("dec", "lt", 0), stats(dec=(0.5, 2.5, 0))),
        prunes(leaf("b", "eq", True), None, {"b": "false"}),
        prunes(leaf("ntz", "lt", "2020-12-31T00:00:00"), None, {"ntz": str(datetime(2021, 1, 1))}),
    ]
    assert all(pruned)
