"""What a netted batch says of itself, read only: the merge job's view of a finished batch.

Netting (:mod:`sharesync.sync.staging.netting`) writes a merge batch as one file,
``netted.parquet``, whose schema metadata records how many change rows it was netted from. The
job that applies it only reads that record; netting is staging's work, done before a job starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from sharesync.sync.core.errors import SyncError
from sharesync.sync.core.location import Location, Place, locate
from sharesync.sync.planning.key_ranges import KeySpan, key_spans

__all__ = [
    "NETTED_FILE",
    "ROWS_BEFORE",
    "NettedBatch",
    "find_netted",
    "has_null_keys",
    "netted_info",
    "read_netted",
    "spelled_keys",
]

NETTED_FILE = "netted.parquet"
ROWS_BEFORE = b"sharesync.rows_before"


@dataclass(frozen=True)
class NettedBatch:
    rows_before: int
    rows_after: int
    null_keys: bool  # some key column is NULL in the batch: the engine must match NULL-safe
    key_spans: tuple[KeySpan, ...] = ()  # per key column: smallest, largest, NULL


def read_netted(directory: Place, keys: Sequence[str]) -> NettedBatch:
    """What a netted batch says of itself, read only (the merge job's view of a finished batch).

    Raises :class:`SyncError` for a batch that is not one netted file: netting is staging's
    work, done while it downloads (``stage(net_keys=…)``, :func:`~sharesync.sync.staging.netting.write_netted`)."""
    _, done = find_netted(directory, keys)
    if done is None:
        raise SyncError(
            f"staged batch '{locate(directory)}' is not netted per key; "
            "stage it with net_keys (sharesync.sync.staging.netting.write_netted) before the merge job"
        )
    return done


def find_netted(directory: Place, keys: Sequence[str]) -> tuple[list[Location], NettedBatch | None]:
    """A staged batch's parquet files, and what it says of itself if it is netted already (an
    empty batch is: nothing to net)."""
    files = [f for f in locate(directory).files() if f.name.endswith(".parquet")]
    if not files:
        return files, NettedBatch(0, 0, False)
    return files, netted_info(files[0], keys) if [f.name for f in files] == [NETTED_FILE] else None


def spelled_keys(columns: Sequence[str], keys: Sequence[str]) -> list[str]:
    """The configured keys as the batch spells them (names match case-insensitively)."""
    by_lower = {c.lower(): c for c in columns}
    return [by_lower.get(k.lower(), k) for k in keys]


def netted_info(file: Location, keys: Sequence[str]) -> NettedBatch | None:
    """What a netted file says of itself; ``None`` if it is not one (no row count recorded)."""
    with file.open_input() as source:
        parquet = pq.ParquetFile(source)
        recorded = (parquet.schema_arrow.metadata or {}).get(ROWS_BEFORE)
        if recorded is None:
            return None
        keys = spelled_keys(parquet.schema_arrow.names, keys)
        keys_only = parquet.read(columns=list(keys))
        spans = key_spans(keys_only, keys)
        return NettedBatch(int(recorded), parquet.metadata.num_rows, has_null_keys(keys_only, keys), spans)


def has_null_keys(table: pa.Table, keys: Sequence[str]) -> bool:
    return any(table.column(k).null_count for k in keys)
