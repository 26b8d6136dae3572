"""Which Delta reader features a table demands, and whether sharesync can read such a table.

sharesync reads only the data files the sharing server lists: it never reads the table's log or
checkpoints and never touches the provider's storage. A reader feature therefore matters only
if it changes how the rows of a listed file are read:

- ``deletionVectors``: rows of a file are dropped per its DV (:mod:`.deletion_vectors`).
- ``columnMapping``: file columns, partition values and stats carry physical names (:mod:`.column_mapping`).
- ``timestampNtz``: a column type (wall-clock timestamp), already mapped by staging.
- ``typeWidening`` (and Delta 3's ``typeWidening-preview``): files written before a column was
  widened hold the narrower type; staging casts every file to the table's current schema, and
  every recorded change is checked to be a widening (:mod:`.type_widening`).
- ``v2Checkpoint``: only the format of the log's checkpoints, which the server reads.
- ``vacuumProtocolCheck``: only constrains VACUUM at the provider.

Everything else is refused by name, including ``variantType`` (no Arrow type).
"""

from __future__ import annotations

from collections.abc import Iterable

from sharesync.sync.core.errors import UnsupportedTableFeature

SUPPORTED_READER_FEATURES = frozenset(
    {
        "deletionVectors",
        "columnMapping",
        "timestampNtz",
        "typeWidening",
        "typeWidening-preview",
        "v2Checkpoint",
        "vacuumProtocolCheck",
    }
)

_MAX_READER_VERSION = 3  # 3 = "table features": the protocol lists its reader features by name


def table_reader_features(min_reader_version: int, reader_features: Iterable[str] | None) -> frozenset[str]:
    """The reader features a ``protocol`` action demands.

    Reader version 1 demands none, 2 demands column mapping (before table features existed),
    3 the ones it lists. A higher version is a format this code does not know.
    """
    if min_reader_version < 1 or min_reader_version > _MAX_READER_VERSION:
        raise UnsupportedTableFeature(
            f"table needs Delta reader version {min_reader_version}; sharesync reads versions 1 to {_MAX_READER_VERSION}"
        )
    if min_reader_version == 1:
        return frozenset()
    if min_reader_version == 2:
        return frozenset({"columnMapping"})
    return frozenset(reader_features or ())


def check_reader_features(
    min_reader_version: int, reader_features: Iterable[str] | None, *, table: str
) -> frozenset[str]:
    """The table's reader features; raises naming each one sharesync cannot read."""
    needed = table_reader_features(min_reader_version, reader_features)
    unsupported = sorted(needed - SUPPORTED_READER_FEATURES)
    if unsupported:
        raise UnsupportedTableFeature(
            f"table {table} uses Delta reader feature(s) {', '.join(unsupported)}, which sharesync cannot read "
            f"(supported: {', '.join(sorted(SUPPORTED_READER_FEATURES))})"
        )
    return needed
