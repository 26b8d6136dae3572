"""A staged batch: the provider's change rows as parquet files, as the Spark jobs read them.

The stager (:mod:`sharesync.sync.staging.batch`) writes a flat directory of parquet files, each
with the table's data columns (one batch schema, partition columns already typed columns) plus
the change-feed columns of :mod:`sharesync.sync.core.changefeed`. A snapshot is the same with
every row an ``insert`` at the snapshot version; a merge-mode batch may be one netted file
(:mod:`sharesync.sync.staging.netting`). Zero files is a valid, empty batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import col
from sharesync.sync.core.changefeed import CHANGE_COLUMNS
from sharesync.sync.core.errors import SyncError
from sharesync.sync.core.location import Location, Place, locate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["count_rows", "read_staged", "staged_files"]


def staged_files(path: Place) -> list[Location]:
    """The batch's data files, by Spark's own rule: names starting with ``_`` or ``.`` are not
    data (``_SUCCESS``, ``.crc``), and neither is a ``*.tmp`` file still being written.

    A missing directory is an error, not an empty batch: treating it as empty would let the
    checkpoint move past changes that were never applied. (In an object store, the stager's
    directory marker is what makes an empty directory exist.)
    """
    directory = locate(path)
    if directory.kind() != "directory":
        raise SyncError(f"staged batch '{directory}' does not exist; stage the batch again")
    return [f for f in directory.files() if not f.name.startswith(("_", ".")) and not f.name.endswith(".tmp")]


def read_staged(spark: SparkSession, path: Place, files: Sequence[Location] | None = None) -> DataFrame:
    """The staged change rows of a non-empty batch.

    The explicit file list (not the directory) is read, so the engine sees exactly the files
    counted here and never infers partition columns from sub-directory names. Provider files a
    snapshot kept as downloaded (:mod:`sharesync.sync.staging.direct`) get their constant
    columns by a join with their group's one-row file: the small side first (an engine may hold
    it in memory), and an outer join, whose file side is nullable as staged columns are (a kept
    file may declare a column NOT NULL; every group has rows, so no row is added).
    """
    from pyspark.sql import functions as F

    directory = locate(path)
    files = staged_files(directory) if files is None else files
    if not files:
        raise SyncError(f"staged batch '{path}' is empty; check staged_files() before reading it")
    from sharesync.sync.staging.direct import read_manifest  # pyarrow: only once a batch is read

    manifest = read_manifest(directory)
    kept = manifest.file_names if manifest is not None else set()
    parts: list[DataFrame] = []
    staged = [f.uri for f in files if f.name not in kept]
    if staged:
        parts.append(spark.read.parquet(*staged))
    if manifest is not None:
        listed = {f.name for f in files}
        order = [col(c) for c in (*manifest.columns, *CHANGE_COLUMNS)]
        read = [c for c in manifest.columns if c not in manifest.partition_columns]
        for group in manifest.groups:
            if not set(group.files) <= listed:
                raise SyncError(f"staged batch '{path}' lacks files its manifest lists; stage the batch again")
            data = spark.read.parquet(*[directory.join(name).uri for name in group.files])
            typed = data.select(*[col(c).cast(group.casts[c]).alias(c) if c in group.casts else col(c) for c in read])
            constants = spark.read.parquet(directory.join(group.constants).uri)
            parts.append(constants.join(typed, on=F.lit(True), how="left").select(*order))
    df = parts[0]
    for part in parts[1:]:
        df = df.unionByName(part)
    missing = [c for c in CHANGE_COLUMNS if c not in df.columns]
    if missing:
        raise SyncError(f"staged batch '{path}' lacks the change-feed columns {missing}; it was staged wrongly")
    return df


def count_rows(files: Sequence[Location]) -> int:
    """Rows staged, from the parquet footers: no engine work."""
    import pyarrow.parquet as pq

    total = 0
    for file in files:
        with file.open_input() as source:
            total += pq.ParquetFile(source).metadata.num_rows
    return total
