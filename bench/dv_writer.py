"""A provider table with deletion vectors, written by Sail (the ``dv`` shape; issue 12).

``deltalake`` cannot write deletion vectors; the embedded Sail engine can: the table is created
with ``delta.enableDeletionVectors=true``, and every ``DELETE``/``UPDATE`` afterwards is a DV
commit (the touched data file removed and re-added with a deletion vector; an update appends
the new rows too) — what a Databricks provider's table looks like. Sail cannot MERGE-update a
DV table, so the change versions mix appends, range updates and range deletes only.

Crafted, because Sail cannot write it: change data feed, turned on in version 0 after the last
Sail write (:func:`sharesync.sync.server.samples.enable_change_data_feed`), and Sail's
checkpoints removed (they would still say CDF is off; the JSON log is complete). Readers then derive
the changed rows of a version from its deletion vectors, as Delta's own CDF reader does.

``deltalake`` cannot read the result either, so the rows a version changes are counted here as
they are written (``change_rows``: appended + deleted + twice the updated, pre- and postimage).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from bench.shapes import Shape

Log = Callable[[str], object]
DV_KINDS = {"append": 0.3, "update": 0.35, "delete": 0.35}


def _kinds(rng: np.random.Generator, versions: int) -> list[str]:
    counts = {k: int(round(versions * share)) for k, share in DV_KINDS.items()}
    counts["update"] += versions - sum(counts.values())
    kinds = [k for k in DV_KINDS for _ in range(counts[k])]
    return [kinds[i] for i in rng.permutation(len(kinds))]


def generate(path: Path, shape: Shape, seed: int, base_commits: int, log: Log) -> tuple[list[str], int, int]:
    """Write the table; returns (kinds of the change versions, live rows, change rows)."""
    from bench.generate import live_range
    from bench.shapes import make_rows
    from sharesync.sync.server.samples import embedded_spark, enable_change_data_feed

    rng = np.random.default_rng(seed)
    table = f"delta.`{path}`"
    with embedded_spark() as spark, tempfile.TemporaryDirectory(prefix="sharesync-dv-") as tmp:

        def write(rows: pa.Table, *, first: bool = False) -> None:
            file = Path(tmp) / f"rows-{time.monotonic_ns()}.parquet"  # through parquet: Arrow types kept
            pq.write_table(rows, file)
            writer = spark.read.parquet(str(file)).write.format("delta").mode("overwrite" if first else "append")
            if first:
                writer = writer.option("delta.enableDeletionVectors", "true")
                if shape.partition_by:
                    writer = writer.partitionBy(*shape.partition_by)
            writer.save(str(path))
            file.unlink()

        per_commit = -(-shape.rows // base_commits)
        for i in range(base_commits):
            ids = np.arange(i * per_commit + 1, min((i + 1) * per_commit, shape.rows) + 1, dtype=np.int64)
            write(make_rows(shape, rng, ids), first=i == 0)
            log(f"  base commit {i + 1}/{base_commits} (Sail, deletion vectors on): {len(ids):,} rows")
        live = np.arange(1, shape.rows + 1, dtype=np.int64)
        next_id, change_rows = shape.rows + 1, 0
        kinds = _kinds(rng, shape.versions)
        updates = ", ".join(f"{column} = {value}" for column, value in shape.updates.items())
        for number, kind in enumerate(kinds, 1):
            began = time.monotonic()
            if kind == "append":
                ids = np.arange(next_id, next_id + shape.change_rows, dtype=np.int64)
                next_id += shape.change_rows
                write(make_rows(shape, rng, ids))
                live = np.concatenate([live, ids])
                change_rows += len(ids)
            else:
                low, high, chosen = live_range(rng, live, shape.change_rows)
                where = f"id >= {low} AND id <= {high}"
                if kind == "update":
                    spark.sql(f"UPDATE {table} SET {updates} WHERE {where}")
                    change_rows += 2 * len(chosen)
                else:
                    spark.sql(f"DELETE FROM {table} WHERE {where}")
                    live = np.setdiff1d(live, chosen, assume_unique=True)
                    change_rows += len(chosen)
            log(f"  change {number}/{len(kinds)}: {kind:<6} ({time.monotonic() - began:.1f} s), {len(live):,} live rows")
    enable_change_data_feed(path)
    _drop_checkpoints(path)
    return kinds, len(live), change_rows


def _drop_checkpoints(path: Path) -> None:
    """Sail checkpoints every 10 commits; those checkpoints hold version 0's metadata as it was
    before change data feed was crafted on. Checkpoints are optional and the JSON log is whole,
    so they go: every reader then replays the log, CDF included."""
    log_dir = path / "_delta_log"
    for file in [*log_dir.glob("*.checkpoint*.parquet"), log_dir / "_last_checkpoint"]:
        file.unlink(missing_ok=True)


def read_provider(path: Path, schema: pa.Schema) -> pa.Table:
    """The table at its latest version, read by Sail (``deltalake`` cannot read deletion vectors)."""
    from sharesync.sync.server.samples import embedded_spark

    os.environ.setdefault("RUST_LOG", "error")  # Sail's session logs would fill the report
    with embedded_spark() as spark:
        table = spark.read.format("delta").load(str(path)).toArrow()
    return table.select(schema.names).cast(schema)
