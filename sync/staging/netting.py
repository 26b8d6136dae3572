"""Net change per key of a batch, computed in Arrow before the engine sees it.

A batch of many versions holds several events per key; a MERGE needs exactly one. Spark's
``row_number()`` window over the key does this correctly but, measured on Sail (bench/),
costs two thirds of an incremental sync and gigabytes of memory. Sorting the batch's keys once
in Arrow and keeping the first row of each key group gives the same rows in a fraction of the
time, and the engine then reads a smaller, already-netted source.

Order within a key: the newest ``_commit_version`` wins; inside one version an
``insert``/``update_postimage`` beats a ``delete``, which beats an ``update_preimage``. Keys
compare NULL-safe: NULL keys form one group.

A netted batch is one parquet file, ``netted.parquet``, whose schema metadata records how many
change rows it was netted from. The stager nets a merge batch in memory as it downloads it
(:func:`write_netted`); the job that applies it only reads it back
(:func:`sharesync.sync.staging.netted.read_netted`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_VERSION, UPSERT_TYPES, ChangeType
from sharesync.sync.core.errors import SchemaIncompatible
from sharesync.sync.core.location import Place, locate
from sharesync.sync.planning.key_ranges import key_spans
from sharesync.sync.staging.files import staged_writer
from sharesync.sync.staging.netted import NETTED_FILE, ROWS_BEFORE, NettedBatch, has_null_keys

_RANK = "__sharesync_rank"


def net_table(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """One row per key, in key order: the winning event by the rule in the module docstring.

    Only the keys, version and rank are sorted; the wide rows are gathered once, for the
    winners — the batch is not copied in full.
    """
    if table.num_rows == 0:
        return table
    missing = [k for k in keys if k not in table.column_names]
    if missing:
        # The run checked the keys against the table's current schema; a change file of an
        # older version can still lack a key column the provider added later.
        raise SchemaIncompatible(
            f"key column(s) {missing} are missing from the change files of this batch (columns: "
            f"{', '.join(table.column_names)}); the provider added them after these versions. "
            "Run 'sharesync reset' for this table to bootstrap from the current snapshot"
        )
    change = table.column(CHANGE_TYPE)
    rank = pc.if_else(
        pc.is_in(change, pa.array(UPSERT_TYPES, pa.string())),
        0,
        pc.if_else(pc.equal(change, ChangeType.DELETE.value), 1, 2),
    )
    narrow = pa.table({**{k: table.column(k) for k in keys}, COMMIT_VERSION: table.column(COMMIT_VERSION), _RANK: rank})
    # NULL keys sort last: pyarrow's default, left implicit because pyarrow >= 25 deprecates a
    # sort-wide ``null_placement`` and the per-key form it prefers is not in older releases.
    order = [(k, "ascending") for k in keys] + [(COMMIT_VERSION, "descending"), (_RANK, "ascending")]
    indices = pc.sort_indices(narrow, sort_keys=order)
    sorted_keys = narrow.select(list(keys)).take(indices)
    winners = indices.filter(_group_starts(sorted_keys, keys))
    return table.take(winners)


def _group_starts(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    """True where a row's key differs (NULL-safe) from the previous row's, i.e. a group begins."""
    n = table.num_rows
    same = pa.array([True] * (n - 1), pa.bool_())
    for key in keys:
        column = table.column(key).combine_chunks()
        current, previous = column.slice(1), column.slice(0, n - 1)
        equal = pc.fill_null(pc.equal(current, previous), False)
        both_null = pc.and_(pc.is_null(current), pc.is_null(previous))
        alike = pc.or_(equal, both_null)
        if pa.types.is_floating(column.type):  # NaN equals NaN in Spark SQL (and sorts last, together)
            alike = pc.or_(alike, pc.fill_null(pc.and_(pc.is_nan(current), pc.is_nan(previous)), False))
        same = pc.and_(same, alike)
    return pa.concat_arrays([pa.array([True]), pc.invert(same)])


def write_netted(table: pa.Table, keys: Sequence[str], directory: Place) -> NettedBatch:
    """Net ``table`` and write it as the batch's one file (published whole: see ``Location.publish``)."""
    netted = net_table(table, keys)
    metadata = {**(netted.schema.metadata or {}), ROWS_BEFORE: str(table.num_rows).encode()}
    target = locate(directory).join(NETTED_FILE)
    netted = netted.replace_schema_metadata(metadata)
    with target.publish() as path, staged_writer(path, netted.schema, target.filesystem) as writer:
        writer.write_table(netted)
    return NettedBatch(table.num_rows, netted.num_rows, has_null_keys(netted, keys), key_spans(netted, keys))
