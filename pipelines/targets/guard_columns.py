"""The columns sharesync adds to a target, and the one rule that tells its tables from others.

Plain names, no Spark: the target readers (identity, row counts) and the Spark jobs
(:mod:`sharesync.pipelines.jobs.columns`, which re-exports them) share one spelling.
"""

from __future__ import annotations

from collections.abc import Sequence

from sharesync.sync.core.changefeed import CHANGE_COLUMNS
from sharesync.sync.core.history_columns import VALID_FROM_VERSION

__all__ = [
    "DELETED_COLUMN",
    "GUARD_COLUMNS",
    "TIMESTAMP_COLUMN",
    "VERSION_COLUMN",
    "written_by_sharesync",
]

VERSION_COLUMN = "_sharesync_version"
TIMESTAMP_COLUMN = "_sharesync_commit_timestamp"
DELETED_COLUMN = "_sharesync_deleted"
GUARD_COLUMNS = (VERSION_COLUMN, TIMESTAMP_COLUMN, DELETED_COLUMN)


def written_by_sharesync(columns: Sequence[str]) -> bool:
    """Whether a table has the columns sharesync writes in some mode: the one rule by which a
    target may be replaced (the reset and rebuild paths) and someone else's table is refused."""
    names = set(columns)
    return bool({VERSION_COLUMN, VALID_FROM_VERSION} & names) or set(CHANGE_COLUMNS) <= names
