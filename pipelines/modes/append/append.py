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
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.targets.delta.fencing import fenced_dml
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.facts import ApplyStats, Tally, Written
from sharesync.pipelines.targets.state import require_columns, require_replaceable
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
    deletion_vectors: bool = True,
) -> Written[ApplyStats]:
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
        return Written(ApplyStats())
    state = WRITER.state(target)
    session = session_of(spark)
    df = read_staged(session, staged, files)
    data_columns = projection(df, (), columns)
    # Rows at or below the checkpoint are in the target already: never write them twice.
    fresh = df.where(keeps(row_filter) & (F.col(COMMIT_VERSION) > F.lit(int(after_version))))
    out = fresh.select(*[col(c) for c in data_columns], *CHANGE_COLUMNS)
    rows = count_rows(files)
    if not state.exists:
        return WRITER.create(out, target, rows=rows, record=record, deletion_vectors=deletion_vectors)
    if after_version < 0:
        # The log restarts (bootstrap after 'sharesync reset', a re-created source, a target to
        # rebuild or switched from another mode): no row of the target survives, so replace it in
        # one commit, schema included — the documented way past a breaking schema change.
        # (DELETE + append would refuse the new schema.)
        require_replaceable(state)
        WRITER.save(out, target, mode="overwrite", schema="replace", record=record)
        return Written(ApplyStats(rows), target, state.version, Tally.WRITTEN)
    require_columns(state, list(CHANGE_COLUMNS), "append")
    if conform:
        state = conform_target(session, df, state, data_columns, exclude=CHANGE_COLUMNS + GUARD_COLUMNS)
    state, _ = widen_target(session, df, state, data_columns, exclude=CHANGE_COLUMNS + GUARD_COLUMNS)
    added = WRITER.added_columns(df, state, data_columns, exclude=CHANGE_COLUMNS + GUARD_COLUMNS)
    name = WRITER.register(session, target)
    with fenced_dml(session):
        session.sql(f"DELETE FROM {name} WHERE {quote_identifier(COMMIT_VERSION)} > {int(after_version)}")
    WRITER.save(out, target, mode="append", schema="merge" if added else "keep", record=record)
    return Written(ApplyStats(rows, added_columns=added), target, state.version, Tally.WRITTEN)
