"""Can a remote engine read what this process stages? Asked of the engine itself, with a probe file.

The jobs hand the engine a path under ``staging_dir``; a ``spark.remote`` engine on another
machine, in a container without the volume, or with the directory mounted elsewhere sees a
different (or no) directory there. Some engines then fail deep inside a job, others — Sail —
read a missing directory as an empty table and would apply an empty batch. So before the first
download of a pass, a tiny parquet file holding a random token is written under
``staging_dir`` and read back through the engine: only the token coming back proves the rule.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from sharesync.sync.core.location import Location, Place, locate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROBE_COLUMN = "sharesync_probe"
RULE = (
    "the engine reads staged files by their path, so staging_dir (or SHARESYNC_STAGING_DIR) must be the "
    "same files at the same path for sharesync and for the engine's driver and workers: any local directory "
    "for an engine on this machine (embedded, or Sail in local-cluster mode), shared storage mounted at the "
    "same path everywhere for a real cluster (see deploy/README.md, 'The staging rule')"
)


def staging_problem(spark: SparkSession, staging_dir: Place, remote: str) -> str | None:
    """Why the engine at ``remote`` cannot read ``staging_dir`` (None: it read the probe back)."""
    token = secrets.token_hex(16)
    directory = locate(staging_dir).join(f".probe-{token}")
    try:
        probe = directory.make_empty().join("probe.parquet")
        pq.write_table(pa.table({PROBE_COLUMN: [token]}), probe.path, filesystem=probe.filesystem)
    except OSError as exc:
        reason = exc.strerror or str(exc).splitlines()[0]
        return f"staging_dir '{staging_dir}' is not writable here ({reason}); choose another staging_dir"
    try:
        seen, said = _read_back(spark, directory)
    finally:
        directory.remove()
    if seen == [(token,)]:
        return None
    said = said or f" (it read {len(seen)} row(s), not the probe's one)"
    return (
        f"staging_dir: the Spark engine at {remote} cannot read the probe file sharesync wrote to "
        f"'{directory}'{said}; {RULE}"
    )


def _read_back(spark: SparkSession, directory: Location) -> tuple[list[tuple[object, ...]], str]:
    """The rows the engine reads at ``directory``, and what it said if it refused (engines differ:
    Sail reads a directory it cannot see as no rows, Spark says the path does not exist)."""
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    try:
        return [tuple(row) for row in spark.read.parquet(directory.uri).collect()], ""
    except SparkConnectGrpcException as exc:  # AnalysisException included
        if exc.getGrpcStatusCode().name == "UNAVAILABLE":
            raise  # the engine is gone, which is no statement about the directory
        return [], f": {str(exc).splitlines()[0]}"
