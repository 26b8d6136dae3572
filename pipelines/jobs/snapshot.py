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
from sharesync.pipelines.targets.delta.write import added_columns, create_target, recorded, register_target
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.targets.delta.commit_metrics import WRITES, ApplyStats, commit_metrics, total, version_after
from sharesync.pipelines.targets.delta.preflight import inspect_target, require_columns, require_replaceable
from sharesync.pipelines.targets.delta.stats import row_count
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
) -> ApplyStats:
    """Bootstrap: make ``target`` exactly the snapshot batch (guards = snapshot version).

    The schema is replaced as well (``overwriteSchema``): this is the ``sharesync reset`` path,
    which exists to get past breaking schema changes. Rows failing ``row_filter`` are left out.
    """
    return _replace(spark, staged, target, keys, columns, row_filter, soft_delete, reset_schema=True, record=record)


def apply_snapshot(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    columns: Sequence[str] | None = None,
    row_filter: Column | None = None,
    record: str | None = None,
) -> ApplyStats:
    """Snapshot mode: replace ``target`` with the snapshot rows in one atomic commit.

    Additive schema changes evolve the target (``mergeSchema``); breaking ones raise
    SchemaIncompatible like the other modes, because silently dropping a column users query
    is worse than asking them to run ``sharesync reset``.
    """
    return _replace(spark, staged, target, (), columns, row_filter, False, reset_schema=False, record=record)


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
) -> ApplyStats:
    target = locate(target)
    files = staged_files(staged)
    state = inspect_target(target)
    if not files and not state.exists:
        return ApplyStats()  # nothing to write, and no schema to create a table with
    session = session_of(spark)
    if not files:
        # An empty snapshot: the provider's table is empty at this version, so ours must be.
        session.sql(f"DELETE FROM {register_target(session, target)}")
        commits = commit_metrics(target, state.version)
        deleted = total(commits, "DELETE", "numDeletedRows")
        return ApplyStats(0, 0, 0, deleted, version_after(state.version, commits))
    previous = row_count(target) if state.exists else 0
    df = read_staged(session, staged, files)
    data_columns = projection(df, keys, columns)
    out = df.where(keeps(row_filter)).select(*[col(c) for c in data_columns], *guard_values(soft_delete))
    rows = count_rows(files)
    if not state.exists:
        return create_target(out, target, rows, record)
    added: tuple[str, ...] = ()
    writer = recorded(out.write.format("delta").mode("overwrite"), record)
    if reset_schema:
        require_replaceable(state)
        writer = writer.option("overwriteSchema", "true")
    else:
        require_columns(state, [VERSION_COLUMN], "snapshot")
        state, _ = widen_target(session, df, state, data_columns, exclude=GUARD_COLUMNS)
        added = added_columns(df, state, data_columns, exclude=GUARD_COLUMNS)
        if added:
            writer = writer.option("mergeSchema", "true")
    writer.save(target.uri)
    commits = commit_metrics(target, state.version)
    inserted = total(commits, WRITES, "numOutputRows")
    return ApplyStats(rows, inserted, 0, previous, version_after(state.version, commits), added)
