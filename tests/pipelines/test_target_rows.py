"""Reading a target that holds deletion vectors: rows, counts and high-water marks leave deleted rows out.

The table is written by Sail (the engine that writes targets) with deletion vectors on, and a
``DELETE`` marks rows in files that stay: the log's per-file ``numRecords`` and maxima still count
them, so only a read of the data is right. ``deltalake``'s own ``to_pyarrow_table`` refuses the table.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.spark import get_spark

from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.delta.rows import count_rows, has_deletion_vectors, read_rows
from sharesync.sync.core.history_columns import IS_CURRENT
from sharesync.sync.core.location import locate

pytestmark = pytest.mark.slow  # starts the embedded engine


@pytest.fixture(scope="module")
def dv_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """100 rows in 2 files, ``v`` = ``id``; then the 10 rows with the largest ``v`` deleted by DVs."""
    path = tmp_path_factory.mktemp("dv") / "t"
    spark = get_spark()
    rows = spark.range(0, 100).selectExpr("id", "id AS v", f"id % 2 = 0 AS {IS_CURRENT}", "'x' AS `odd name`")
    rows.repartition(2).write.format("delta").option("delta.enableDeletionVectors", "true").save(str(path))
    spark.sql(f"DELETE FROM delta.`{path}` WHERE v >= 90").collect()
    return path


def test_the_table_has_deletion_vectors_that_the_plain_pyarrow_reader_refuses(dv_target: Path) -> None:
    table = DeltaTable(str(dv_target))
    assert has_deletion_vectors(table)
    with pytest.raises(Exception, match="(?i)deletionVectors"):
        table.to_pyarrow_table()


def test_rows_and_counts_leave_out_deleted_rows(dv_target: Path) -> None:
    target = locate(str(dv_target))
    assert count_rows(target) == 90 == read_rows(target).num_rows
    assert read_rows(target, ["odd name", "id"], '"id" < 3').column_names == ["odd name", "id"]
    stats = DELTA.stats(target)
    assert stats is not None and stats.rows == 90  # the log's numRecords sum to 100
    assert DELTA.current_rows(target) == 45


def test_the_high_water_mark_is_the_live_rows_maximum(dv_target: Path) -> None:
    assert DELTA.high_water_mark(locate(str(dv_target)), "v") == 89  # the log's maximum of v is 99


def test_the_port_reads_every_live_row_once(dv_target: Path) -> None:
    rows = DELTA.rows(locate(str(dv_target)), ["id", IS_CURRENT])
    assert rows is not None and sorted(rows.column("id").to_pylist()) == list(range(90))
