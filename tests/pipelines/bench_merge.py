"""Quick timing of the engine start and a 200k-net-change MERGE into a 1M-row target.

Not a test (pytest does not collect it): ``.venv/bin/python tests/pipelines/bench_merge.py``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pipelines.merge import apply_merge, replace_target
from pipelines.spark import get_spark, stop_spark

TARGET_ROWS = 1_000_000
UPDATES, DELETES, INSERTS = 100_000, 50_000, 50_000  # 200k net changes from 300k change rows


def _rows(ids: np.ndarray, change: str, version: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(ids)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"name-{i}" for i in ids]),
            "amount": pa.array(rng.random(n) * 1000),
            "qty": pa.array(rng.integers(0, 100, n).astype(np.int32)),
            "updated_at": pa.array([start + timedelta(seconds=int(i)) for i in ids], pa.timestamp("us", tz="UTC")),
            "_change_type": pa.array([change] * n),
            "_commit_version": pa.array(np.full(n, version), pa.int64()),
            "_commit_timestamp": pa.array([start + timedelta(days=version)] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def _stage(directory: Path, tables: list[pa.Table]) -> Path:
    directory.mkdir(parents=True)
    for i, table in enumerate(tables):
        pq.write_table(table, directory / f"part-{i:04d}.parquet")
    return directory


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="sharesync-bench-"))
    try:
        t0 = time.perf_counter()
        spark = get_spark()
        spark.sql("SELECT 1").collect()
        print(f"engine start (incl. first query): {time.perf_counter() - t0:.2f} s")

        ids = np.arange(TARGET_ROWS)
        snapshot = _stage(work / "snapshot", [_rows(chunk, "insert", 1, 1) for chunk in np.array_split(ids, 8)])
        target = str(work / "target")
        t0 = time.perf_counter()
        stats = replace_target(spark, snapshot, target)
        print(f"bootstrap {stats.inserted:,} rows: {time.perf_counter() - t0:.2f} s")

        rng = np.random.default_rng(7)
        touched = rng.choice(TARGET_ROWS, UPDATES + DELETES, replace=False)
        updated, deleted = touched[:UPDATES], touched[UPDATES:]
        inserted = np.arange(TARGET_ROWS, TARGET_ROWS + INSERTS)
        batch = _stage(
            work / "batch",
            [
                _rows(updated, "update_preimage", 2, 2),
                _rows(updated, "update_postimage", 2, 3),
                _rows(deleted, "delete", 2, 4),
                _rows(inserted, "insert", 2, 5),
            ],
        )
        t0 = time.perf_counter()
        stats = apply_merge(spark, batch, target, keys=["id"])
        print(f"merge {stats.rows_in_batch:,} change rows -> {stats}: {time.perf_counter() - t0:.2f} s")
        t0 = time.perf_counter()
        again = apply_merge(spark, batch, target, keys=["id"])
        print(f"re-apply same batch (no-op) -> {again.changed_rows} changes: {time.perf_counter() - t0:.2f} s")

        soft = str(work / "soft")
        replace_target(spark, snapshot, soft, soft_delete=True)
        t0 = time.perf_counter()
        stats = apply_merge(spark, batch, soft, keys=["id"], soft_delete=True)
        print(f"soft-delete merge (incl. counting soft deletes) -> {stats}: {time.perf_counter() - t0:.2f} s")
    finally:
        stop_spark()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
