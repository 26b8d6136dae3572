"""Property: applying versions 1..n as one batch or as two contiguous batches gives the same
target, and both equal a plain-Python model of the provider table (with or without a filter).

The one batch is applied with the MERGE statement, the split batches with the copy-on-write
rewrite (``sharesync.pipelines.modes.merge.rewrite``), so the property also holds the two strategies to each other."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.jobs import apply_merge, data_rows, delete, ins, post, pre, write_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KEYS = range(5)
Row = dict[str, Any]
scores = st.one_of(st.none(), st.integers(0, 10))


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[list[Row]], dict[int, Row]]:
    """Commits 1..n of change rows, and the provider table they lead to."""
    table: dict[int, Row] = {}
    commits: list[list[Row]] = []
    for version in range(1, draw(st.integers(1, 6)) + 1):
        rows: list[Row] = []
        for key in draw(st.lists(st.sampled_from(KEYS), unique=True, max_size=4)):
            new = {"id": key, "name": f"v{version}", "score": draw(scores)}
            old = table.get(key)
            op = draw(st.sampled_from(["upsert", "delete", "rewrite"]) if old else st.just("upsert"))
            if old is None:
                rows.append(ins(version, **new))
                table[key] = new
            elif op == "upsert":
                rows += [pre(version, **old), post(version, **new)]
                table[key] = new
            elif op == "delete":
                rows.append(delete(version, **old))
                del table[key]
            else:  # a file rewrite without change data: removed and added back unchanged
                rows += [delete(version, **old), ins(version, **old)]
        commits.append(rows)
    return commits, table


_runs = itertools.count()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories(), st.data(), st.booleans())
def test_split_batches_equal_one_batch_equal_the_model(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    history: tuple[list[list[Row]], dict[int, Row]],
    data: st.DataObject,
    filtered: bool,
) -> None:
    from pyspark.sql import functions as F

    commits, table = history
    root = tmp_path_factory.mktemp(f"prop{next(_runs)}")
    keep = (F.col("score") > 5) if filtered else None
    split = data.draw(st.integers(0, len(commits)))

    def run(target: Path, parts: list[list[list[Row]]], rewrite_threshold: float | None) -> None:
        for i, part in enumerate(parts):
            batch = write_batch(target.with_name(f"{target.name}-batch{i}"), [r for c in part for r in c])
            apply_merge(spark, batch, str(target), keys=["id"], row_filter=keep, rewrite_threshold=rewrite_threshold)

    run(root / "one", [commits], rewrite_threshold=None)
    run(root / "two", [commits[:split], commits[split:]], rewrite_threshold=0.0)
    expected = sorted(
        (row for row in table.values() if not filtered or (row["score"] is not None and row["score"] > 5)),
        key=lambda r: r["id"],
    )
    for name in ("one", "two"):
        got = data_rows(root / name) if (root / name).exists() else []
        assert got == expected, name
