"""Append mode: the target is the change log itself, each change row exactly once.

Rows keep their data columns plus the change-feed columns ``_change_type``, ``_commit_version``
and ``_commit_timestamp``. Exactly once without a MERGE: every run first deletes the rows above the
checkpoint, then appends the batch. That is safe because the checkpoint (``after_version``)
only moves after the append has committed, so any row above it was written by an attempt that
crashed before its checkpoint — and this attempt is about to write the same rows again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import GUARD_COLUMNS, col, keeps, projection, quote_identifier
from sharesync.pipelines.jobs.conform import conform_target
from sharesync.pipelines.jobs.session import session_of
from sharesync.pipelines.jobs.staged import count_rows, read_staged, staged_files
from sharesync.pipelines.targets.delta.write import added_columns, create_target, recorded, register_target
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.targets.delta.commit_metrics import WRITES, ApplyStats, commit_metrics, total, version_after
from sharesync.pipelines.targets.delta.preflight import inspect_target, require_columns, require_replaceable
from sharesync.sync.core.changefeed import CHANGE_COLUMNS, COMMIT_VERSION
from sharesync.sync.core.location import Place, locate

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = ["apply_append"]


def apply_append(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    after_version: int,
    columns: Sequence[str] | None = None,
    row_filter: Column | None = None,
    conform: bool = False,
    record: str | None = None,
) -> ApplyStats:
    """Append the batch's change rows above ``after_version`` (the checkpoint) to ``target``.

    ``conform`` (a rebuild after a breaking schema change): the rows already there are first moved
    into the batch's schema (:mod:`~sharesync.pipelines.jobs.conform`), so the log continues.

    A change row is kept when its own image satisfies ``row_filter`` (only TRUE keeps it).
    ``inserted`` counts the rows appended; rows removed from a crashed earlier attempt are not
    reported as deletes, since the same rows are written again.
    """
    from pyspark.sql import functions as F

    target = locate(target)
    files = staged_files(staged)
    if not files:
        return ApplyStats()
    state = inspect_target(target)
    session = session_of(spark)
    df = read_staged(session, staged, files)
    data_columns = projection(df, (), columns)
    # Rows at or below the checkpoint are in the target already: never write them twice.
    fresh = df.where(keeps(row_filter) & (F.col(COMMIT_VERSION) > F.lit(int(after_version))))
    out = fresh.select(*[col(c) for c in data_columns], *CHANGE_COLUMNS)
    rows = count_rows(files)
    if not state.exists:
        return create_target(out, target, rows, record)
    if after_version < 0:
        # The log restarts (bootstrap after 'sharesync reset', a re-created source, a target to
        # rebuild or switched from another mode): no row of the target survives, so replace it in
        # one commit, schema included — the documented way past a breaking schema change.
        # (DELETE + append would refuse the new schema.)
        require_replaceable(state)
        recorded(out.write.format("delta").mode("overwrite").option("overwriteSchema", "true"), record).save(target.uri)
        commits = commit_metrics(target, state.version)
        return ApplyStats(rows, total(commits, WRITES, "numOutputRows"), 0, 0, version_after(state.version, commits))
    require_columns(state, list(CHANGE_COLUMNS), "append")
    if conform:
        state = conform_target(session, df, state, data_columns, exclude=CHANGE_COLUMNS + GUARD_COLUMNS)
    state, _ = widen_target(session, df, state, data_columns, exclude=CHANGE_COLUMNS + GUARD_COLUMNS)
    added = added_columns(df, state, data_columns, exclude=CHANGE_COLUMNS + GUARD_COLUMNS)
    name = register_target(session, target)
    session.sql(f"DELETE FROM {name} WHERE {quote_identifier(COMMIT_VERSION)} > {int(after_version)}")
    writer = recorded(out.write.format("delta").mode("append"), record)
    if added:
        writer = writer.option("mergeSchema", "true")
    writer.save(target.uri)
    commits = commit_metrics(target, state.version)
    inserted = total(commits, WRITES, "numOutputRows")
    return ApplyStats(rows, inserted, 0, 0, version_after(state.version, commits), added)
