"""What a target row looks like, and the Spark column expressions every job builds it with.

Target columns are the projected data columns (in source order) plus sharesync's own:
``_sharesync_version`` (long: the source commit of the row's last change — merge mode's
exactly-once guard), ``_sharesync_commit_timestamp`` (timestamp of that commit) and, with soft
delete, ``_sharesync_deleted`` (boolean). Append-mode targets keep the change-feed columns
(:mod:`sharesync.sync.core.changefeed`) instead; history-mode targets hold one row per image with
the validity columns of :mod:`sharesync.sync.core.history_columns` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.guard_columns import (
    DELETED_COLUMN,
    GUARD_COLUMNS,
    TIMESTAMP_COLUMN,
    VERSION_COLUMN,
    written_by_sharesync,
)
from sharesync.sync.core.changefeed import CHANGE_COLUMNS, COMMIT_TIMESTAMP, COMMIT_VERSION
from sharesync.sync.core.history_columns import (
    HISTORY_COLUMNS,
    IS_CURRENT,
    VALID_FROM,
    VALID_FROM_VERSION,
    VALID_TO,
    VALID_TO_VERSION,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "DELETED_COLUMN",
    "GUARD_COLUMNS",
    "HISTORY_COLUMNS",
    "IS_CURRENT",
    "TIMESTAMP_COLUMN",
    "VALID_FROM",
    "VALID_FROM_VERSION",
    "VALID_TO",
    "VALID_TO_VERSION",
    "VERSION_COLUMN",
    "col",
    "guard_values",
    "keeps",
    "projected",
    "projection",
    "quote_identifier",
    "spelled",
    "written_by_sharesync",
]


def quote_identifier(name: str) -> str:
    """A backtick-quoted identifier: column names may contain dots, spaces or backticks."""
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(quote_identifier(name))


def keeps(row_filter: Column | None) -> Column:
    """Only TRUE keeps a row; NULL (unknown) drops it, as in a SQL ``WHERE``."""
    from pyspark.sql import functions as F

    return F.lit(True) if row_filter is None else F.coalesce(row_filter, F.lit(False))


def guard_values(soft_delete: bool) -> list[Column]:
    """Guard columns for rows written straight from a batch (creation, bootstrap)."""
    from pyspark.sql import functions as F

    guards = [F.col(COMMIT_VERSION).cast("long").alias(VERSION_COLUMN), F.col(COMMIT_TIMESTAMP).alias(TIMESTAMP_COLUMN)]
    return [*guards, F.lit(False).alias(DELETED_COLUMN)] if soft_delete else guards


def projection(df: DataFrame, keys: Sequence[str], columns: Sequence[str] | None) -> list[str]:
    """The data columns to write, in source order; keys are always kept.

    Names match case-insensitively. That every configured key and column exists is checked once,
    against the shared table's schema, before a run downloads anything.
    """
    return projected(df.columns, keys, columns)


def projected(names: Sequence[str], keys: Sequence[str], columns: Sequence[str] | None) -> list[str]:
    """:func:`projection` over a batch's column names (a job that reads the batch in Arrow)."""
    data = [c for c in names if c not in CHANGE_COLUMNS and c not in GUARD_COLUMNS]
    wanted = {c.lower() for c in (*keys, *(data if columns is None else columns))}
    return [c for c in data if c.lower() in wanted]


def spelled(names: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """``wanted`` as ``names`` spell them: config names match a table's columns in any case (a
    name the table lacks stays as given, so the reader's error names it)."""
    by_lower = {n.lower(): n for n in names}
    return [by_lower.get(w.lower(), w) for w in wanted]
