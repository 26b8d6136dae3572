"""widen_target: the target's rows unchanged, the widened columns cast up, nothing left to do after.

This is what makes a failure between the widening and the batch's own write harmless: the
target is only wider (same rows), and the retry finds nothing to widen. The target is written by
sharesync's own merge bootstrap; the batch is the provider's rows in the wider types.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from support.jobs import apply_merge

from sharesync.pipelines.jobs.columns import GUARD_COLUMNS
from sharesync.pipelines.jobs.staged import read_staged
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.sync.core.location import locate

from .conftest import StageFn

NARROW = pa.schema([("id", pa.int64()), ("qty", pa.int32()), ("day", pa.date32()), ("name", pa.string())])
WIDE = pa.schema([("id", pa.int64()), ("qty", pa.int64()), ("day", pa.timestamp("us")), ("name", pa.string())])


def _rows(target: str) -> list[dict[str, Any]]:
    return sorted(read_rows(DeltaTable(target)).to_pylist(), key=lambda r: r["id"])


def test_widening_keeps_every_row_and_is_done_once(spark: Any, stage: StageFn, target: str) -> None:
    first = [{"_change_type": "insert", "_commit_version": 1, "id": i, "qty": i, "day": dt.date(2024, 1, i),
              "name": f"n{i}"} for i in (1, 2)]  # fmt: skip
    apply_merge(spark, stage(first, NARROW), target, keys=["id"])
    before = _rows(target)
    batch = stage([{"_change_type": "insert", "_commit_version": 2, "id": 3, "qty": 5_000_000_000,
                    "day": dt.datetime(2025, 1, 1, 5, 6), "name": "n3"}], WIDE)  # fmt: skip
    df = read_staged(spark, batch)
    columns = ["id", "qty", "day", "name"]

    state, widened = widen_target(spark, df, WRITER.state(locate(target)), columns, exclude=GUARD_COLUMNS)

    assert sorted(widened) == ["day", "qty"]
    types = {f.name: f.type.type for f in DeltaTable(target).schema().fields}
    assert (types["qty"], types["day"], types["name"]) == ("long", "timestamp_ntz", "string")
    after = _rows(target)
    assert [{**r, "day": dt.datetime.combine(r["day"], dt.time())} for r in before] == after  # same rows, wider
    assert widen_target(spark, df, state, columns, exclude=GUARD_COLUMNS) == (state, ())  # nothing left
    assert WRITER.added_columns(df, state, columns, exclude=GUARD_COLUMNS) == ()
