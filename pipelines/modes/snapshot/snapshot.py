"""Whole-table replacement: the merge-mode bootstrap and snapshot mode.

Both write the snapshot rows as the entire target in one ``mode("overwrite")`` commit, so
readers see the old table or the new one, never a mix. Rows carry ``_sharesync_version`` and
``_sharesync_commit_timestamp`` (the snapshot's version and commit time) in both cases: a
merge-mode bootstrap needs them as guards, and in snapshot mode they tell users which version
they hold — one layout for both also lets a table switch modes without a rewrite.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import (
    GUARD_COLUMNS,
    VERSION_COLUMN,
    col,
    guard_values,
    keeps,
    projection,
)
from sharesync.pipelines.jobs.session import session_of
from sharesync.pipelines.jobs.staged import count_rows, read_staged, staged_files
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.targets.delta.fencing import fenced_dml
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.facts import ApplyStats, Tally, Written
from sharesync.pipelines.targets.port import SchemaMode
from sharesync.pipelines.targets.state import require_columns, require_replaceable
from sharesync.sync.core.location import Place, locate

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = ["apply_snapshot", "replace_target"]


def replace_target(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    keys: Sequence[str] = (),
    columns: Sequence[str] | None = None,
    row_filter: Column | None = None,
    soft_delete: bool = False,
    record: str | None = None,
    deletion_vectors: bool = True,
) -> Written[ApplyStats]:
    """Bootstrap: make ``target`` exactly the snapshot batch (guards = snapshot version).

    The schema is replaced as well (``overwriteSchema``): this is the ``sharesync reset`` path,
    which exists to get past breaking schema changes. Rows failing ``row_filter`` are left out.
    """
    return _replace(
        spark,
        staged,
        target,
        keys,
        columns,
        row_filter,
        soft_delete,
        reset_schema=True,
        record=record,
        deletion_vectors=deletion_vectors,
    )


def apply_snapshot(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    columns: Sequence[str] | None = None,
    row_filter: Column | None = None,
    record: str | None = None,
    deletion_vectors: bool = True,
) -> Written[ApplyStats]:
    """Snapshot mode: replace ``target`` with the snapshot rows in one atomic commit.

    Additive schema changes evolve the target (``mergeSchema``); breaking ones raise
    SchemaIncompatible like the other modes, because silently dropping a column users query
    is worse than asking them to run ``sharesync reset``.
    """
    return _replace(
        spark,
        staged,
        target,
        (),
        columns,
        row_filter,
        False,
        reset_schema=False,
        record=record,
        deletion_vectors=deletion_vectors,
    )


def _replace(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    keys: Sequence[str],
    columns: Sequence[str] | None,
    row_filter: Column | None,
    soft_delete: bool,
    *,
    reset_schema: bool,
    record: str | None,
    deletion_vectors: bool = True,
) -> Written[ApplyStats]:
    target = locate(target)
    files = staged_files(staged)
    state = WRITER.state(target)
    if not files and not state.exists:
        return Written(ApplyStats())  # nothing to write, and no schema to create a table with
    session = session_of(spark)
    if not files:
        # An empty snapshot: the provider's table is empty at this version, so ours must be.
        name = WRITER.register(session, target)
        with fenced_dml(session):
            session.sql(f"DELETE FROM {name}")
        return Written(ApplyStats(), target, state.version, Tally.DELETED)
    previous = WRITER.rows(target) if state.exists else 0
    df = read_staged(session, staged, files)
    data_columns = projection(df, keys, columns)
    out = df.where(keeps(row_filter)).select(*[col(c) for c in data_columns], *guard_values(soft_delete))
    rows = count_rows(files)
    if not state.exists:
        return WRITER.create(out, target, rows=rows, record=record, deletion_vectors=deletion_vectors)
    added: tuple[str, ...] = ()
    schema: SchemaMode = "keep"
    if reset_schema:
        require_replaceable(state)
        schema = "replace"
    else:
        require_columns(state, [VERSION_COLUMN], "snapshot")
        state, _ = widen_target(session, df, state, data_columns, exclude=GUARD_COLUMNS)
        added = WRITER.added_columns(df, state, data_columns, exclude=GUARD_COLUMNS)
        if added:
            schema = "merge"
    WRITER.save(out, target, mode="overwrite", schema=schema, record=record)
    known = ApplyStats(rows, deleted=previous, added_columns=added)
    return Written(known, target, state.version, Tally.WRITTEN)
