"""``to_spark`` on a real engine: an embedded Sail server selects exactly the rows for which
``evaluate`` is TRUE, for every operator on every supported column type, nulls included.

The session time zone is deliberately not UTC: timestamp literals carry their offset and
must not depend on it. Sail findings (pysail 0.7.2) are noted where they shaped the code.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from sharesync.sync.predicates import FALSE, TRUE, Expr, Not, and_, bind, evaluate, or_, to_spark

from .strategies import ARROW_TYPES, COLUMNS, SCHEMA, exprs

NAN, INF = math.nan, math.inf
ROWS: list[dict[str, Any]] = [
    {
        "i": 1,
        "d": 1.5,
        "f": 0.1,
        "dec": Decimal("1.23"),
        "s": "abc",
        "b": True,
        "dt": date(2021, 1, 1),
        "ts": datetime(2021, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        "ntz": datetime(2021, 1, 1, 0, 0, 0, 1),
    },
    {"i": None, "d": None, "f": None, "dec": None, "s": None, "b": None, "dt": None, "ts": None, "ntz": None},
    {
        "i": -2,
        "d": NAN,
        "f": NAN,
        "dec": Decimal("-0.50"),
        "s": "ABC",
        "b": False,
        "dt": date(2021, 1, 3),
        "ts": datetime(2021, 1, 1, 5, tzinfo=UTC),
        "ntz": datetime(2021, 1, 1, 5),
    },
    {
        "i": 0,
        "d": -0.0,
        "f": -0.0,
        "dec": Decimal("0.00"),
        "s": "a%b_c",
        "b": True,
        "dt": date(2021, 1, 2),
        "ts": datetime(2021, 1, 1, 0, 0, 0, 2, tzinfo=UTC),
        "ntz": datetime(2021, 1, 1, 0, 0, 0, 2),
    },
    {
        "i": 3,
        "d": INF,
        "f": -INF,
        "dec": Decimal("12.35"),
        "s": "a\nb",
        "b": None,
        "dt": date(2020, 12, 31),
        "ts": datetime(2020, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        "ntz": datetime(2020, 12, 31, 23, 59, 59, 999999),
    },
    {"i": 3, "d": 0.0, "f": 1.5, "dec": Decimal("1.20"), "s": "école", "b": False, "dt": None, "ts": None, "ntz": None},
    {
        "i": None,
        "d": -INF,
        "f": 0.0,
        "dec": None,
        "s": "ÉCOLE",
        "b": True,
        "dt": date(2021, 1, 1),
        "ts": datetime(2021, 1, 1, tzinfo=UTC),
        "ntz": datetime(2021, 1, 1),
    },
    {
        "i": 7,
        "d": 2.0,
        "f": 2.0,
        "dec": Decimal("99.99"),
        "s": "",
        "b": False,
        "dt": date(2021, 1, 1),
        "ts": datetime(2021, 1, 1, 2, tzinfo=UTC),
        "ntz": datetime(2021, 1, 1, 2),
    },
]
for _row in ROWS:  # the float column holds float32 values
    _row["f"] = None if _row["f"] is None else pa.scalar(_row["f"], pa.float32()).as_py()

# (column, op, values to try): every operator on every column kind
OPERATORS: list[tuple[str, str, list[Any]]] = [
    *[(c, op, vals) for c, vals in {
        "i": [0, 3, -2],
        "d": [0.0, 1.5, -0.0, INF, -INF, 1e300],
        "f": [0.1, 0.0, 1.5, -INF],
        "dec": ["1.23", 1.2, "-0.5", "12.345", 0],
        "s": ["abc", "ABC", "", "a%b_c", "école"],
        "b": [True, False],
        "dt": ["2021-01-01", "2021-01-02"],
        "ts": ["2021-01-01T00:00:00.000001Z", "2021-01-01T07:00:00+02:00", "2021-01-01 00:00:00.000002", "2021-01-01"],
        "ntz": ["2021-01-01T00:00:00.000001", "2021-01-01T05:00:00", "2020-12-31T23:59:59.999999"],
    }.items() for op in ("eq", "neq", "gt", "gte", "lt", "lte")],
    ("i", "in", [[0, 3], [9]]),
    ("d", "in", [[0.0, INF], [1.5]]),
    ("f", "in", [[0.1, 2.0], [0.1, -0.0], [0.0, 0.1]]),  # signed zeros: Sail matched float32 IN lists bitwise
    ("dec", "in", [["1.23", "1.2"], [0]]),
    ("s", "in", [["abc", ""], ["école", "x"]]),
    ("dt", "in", [["2021-01-01", "2021-01-03"]]),
    ("ts", "in", [["2021-01-01T05:00:00Z", "2021-01-01T00:00:00.000001Z"]]),
    ("ntz", "in", [["2021-01-01T05:00:00", "2021-01-01T00:00:00.000001"]]),
    ("s", "like", ["a%", "a_c", "a\\%b\\_c", "%", "", "a%b", "_"]),
    ("s", "ilike", ["abc", "é%", "É%", "%C%", "a\\%%"]),
]  # fmt: skip


def _leaves() -> list[Expr]:
    found: list[Expr] = []
    for col, op, values in OPERATORS:
        found += [bind([{"col": col, "op": op, "val": v}], SCHEMA) for v in values]
    for col in COLUMNS:
        found += [bind([{"col": col, "op": "is_null"}], SCHEMA), bind([{"col": col, "op": "is_not_null"}], SCHEMA)]
    return found


LEAVES = _leaves()
COMPOSITES: list[Expr] = [
    TRUE,
    FALSE,
    Not(bind([{"col": "i", "op": "in", "val": [0, 3]}], SCHEMA)),  # NOT IN: null stays unknown
    Not(bind([{"col": "s", "op": "like", "val": "a%"}], SCHEMA)),
    Not(bind([{"col": "d", "op": "gt", "val": 1}], SCHEMA)),  # NaN > 1, so NOT is false for NaN
    or_(bind([{"col": "i", "op": "eq", "val": 3}], SCHEMA), bind([{"col": "b", "op": "eq", "val": True}], SCHEMA)),
    Not(
        and_(bind([{"col": "i", "op": "gt", "val": 0}], SCHEMA), bind([{"col": "b", "op": "eq", "val": True}], SCHEMA))
    ),
    # Disjoint IN lists on one column: Sail 0.7 folds the AND to FALSE, which NULL is not.
    Not(bind([{"col": "b", "op": "in", "val": [False]}, {"col": "b", "op": "in", "val": [True]}], SCHEMA)),
    Not(bind([{"col": "i", "op": "in", "val": [0, 3]}, {"col": "i", "op": "in", "val": [7]}], SCHEMA)),
]


@pytest.fixture(scope="module")
def frame() -> Iterator[Any]:
    from pysail.spark import SparkConnectServer

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    _, port = server.listening_address
    spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    columns = {c: pa.array([r[c] for r in ROWS], ARROW_TYPES[c]) for c in COLUMNS if c != "ntz"}
    # Sail reads a naive Arrow timestamp as a (zoned) timestamp, not timestamp_ntz: cast from text.
    ntz_text = [None if r["ntz"] is None else r["ntz"].isoformat(sep=" ") for r in ROWS]
    table = pa.table({"__row": pa.array(range(len(ROWS)), pa.int64()), **columns, "ntz_text": pa.array(ntz_text)})
    df = spark.createDataFrame(table).withColumn("ntz", F.col("ntz_text").cast("timestamp_ntz"))
    try:
        yield df
    finally:
        spark.stop()
        server.stop()


def _spark_rows(frame: Any, expressions: list[Expr]) -> list[list[int]]:
    """For each expression, the row indexes Spark keeps (one query for all of them)."""
    selected = frame.select("__row", *(to_spark(e).alias(f"e{k}") for k, e in enumerate(expressions)))
    result = selected.orderBy("__row").collect()
    return [[r["__row"] for r in result if r[f"e{k}"] is True] for k in range(len(expressions))]


def _expected(expr: Expr) -> list[int]:
    return [i for i, r in enumerate(ROWS) if evaluate(expr, r) is True]


def test_frame_has_the_schema_types(frame: Any) -> None:
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    assert types["ntz"] == "timestamp_ntz" and types["ts"] == "timestamp" and types["f"] == "float"
    assert types["dec"] == "decimal(10,2)" and types["dt"] == "date" and types["i"] == "int"


@pytest.mark.parametrize("group", ["leaves", "composites"])
def test_spark_selects_what_evaluate_selects(frame: Any, group: str) -> None:
    expressions = LEAVES if group == "leaves" else COMPOSITES
    actual = _spark_rows(frame, expressions)
    mismatches = [(e, got, _expected(e)) for e, got in zip(expressions, actual, strict=True) if got != _expected(e)]
    assert not mismatches
    assert sum(map(len, actual)) > len(expressions)  # the table exercises the operators (not all empty)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=exprs())
def test_spark_selects_what_evaluate_selects_for_random_trees(frame: Any, expr: Expr) -> None:
    assert _spark_rows(frame, [expr]) == [_expected(expr)]
