"""History mode's write: a planned batch in one Delta commit (SCD type 2 targets).

The batch is planned before this job starts (:mod:`sharesync.pipelines.modes.history.history_batch`: the
staged changes against the target's rows, :mod:`sharesync.sync.planning.history_plan`), and its
plan staged as one parquet file next to the batch. This job only writes it: the target's columns
conformed or widened first when the batch asks for it, then a MERGE, or a copy-on-write rewrite
when the plan touches ``rewrite_threshold`` of the target's rows
(:mod:`sharesync.pipelines.modes.history.history_write`). A re-applied batch planned nothing and writes
nothing. The run's lease keeps other writers out between the plan's read and the commit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import HISTORY_COLUMNS
from sharesync.pipelines.jobs.conform import conform_target
from sharesync.pipelines.jobs.key_bounds import bounds_of, within_bounds
from sharesync.pipelines.jobs.session import session_of
from sharesync.pipelines.jobs.staged import read_staged
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.modes.history.history_write import evolve_history, merge_plan, rewrite_plan, written_columns
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.facts import ApplyStats, Written
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.core.location import Location
from sharesync.sync.planning.key_ranges import KeySpan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["HistoryStats", "PlannedHistory", "tracked_columns", "write_history"]


@dataclass(frozen=True, kw_only=True)
class HistoryStats(ApplyStats):
    """What a history job did. ``inserted``: rows opened; ``updated``: existing rows changed (closed,
    reopened or updated in place); ``deleted``: rows removed (history a backfill rewrites, or the
    rows a replacing bootstrap dropped). ``opened``/``closed``: history rows opened and closed —
    a row opened and closed within the batch counts in both."""

    opened: int = 0
    closed: int = 0


@dataclass(frozen=True, kw_only=True)
class PlannedHistory:
    """A history batch whose plan is staged: what the write needs, decided before the job starts."""

    staged: Location
    target: Location
    files: Sequence[Location]  # the batch's staged change files
    state: TargetState  # the target as the plan read it
    keys: Sequence[str]  # as the batch spells them
    data_columns: Sequence[str]
    stats: HistoryStats  # the plan's counts; the write adds the added columns and the version
    plan_file: Location | None  # None: nothing to write (a re-applied batch)
    null_keys: bool  # an action's key is NULL: match NULL-safe
    rewrite: bool  # copy-on-write instead of a MERGE
    replace: bool  # the target becomes the batch's rows (a first bootstrap, or after a reset)
    conform: bool  # a rebuild: move the target's rows into the batch's schema first
    record: str | None = None  # the commit record of the batch, with a write that can carry it
    deletion_vectors: bool = True  # a target this creates is merge-on-read
    key_spans: tuple[KeySpan, ...] = ()  # the actions' keys: the MERGE reads only files that can hold them


def write_history(spark: SparkSession | Callable[[], SparkSession], planned: PlannedHistory) -> Written[HistoryStats]:
    """Write a planned batch in one commit (after conforming or widening the target if needed);
    what it committed, counted by the plan (the format adds the target's version)."""
    session = session_of(spark)
    state, columns = planned.state, planned.data_columns
    if state.exists and not planned.replace and planned.files:
        batch = read_staged(session, planned.staged, planned.files)
        if planned.conform:
            state = conform_target(session, batch, state, columns, exclude=HISTORY_COLUMNS)
        state, _ = widen_target(session, batch, state, columns, exclude=HISTORY_COLUMNS)
        added = evolve_history(batch, state, columns)
    else:
        added = ()
    stats = dataclasses.replace(planned.stats, added_columns=added)
    if planned.plan_file is None:
        return Written(stats)  # a re-applied batch: already in the target
    actions = session.read.parquet(planned.plan_file.uri)
    deleted = _write(session, planned, state, actions)
    return Written(dataclasses.replace(stats, deleted=stats.deleted + deleted), planned.target, state.version)


def tracked_columns(
    data_columns: Sequence[str],
    keys: Sequence[str],
    track_history: Sequence[str] | None,
    track_history_except: Sequence[str] | None,
) -> list[str] | None:
    """The non-key columns whose change opens a new row, as the batch spells them; None: every change does."""
    if track_history is None and track_history_except is None:
        return None
    key_names = {k.lower() for k in keys}
    if track_history is not None:
        wanted = {c.lower() for c in track_history}
    else:
        wanted = {c.lower() for c in data_columns} - {c.lower() for c in track_history_except or ()}
    return [c for c in data_columns if c.lower() in wanted and c.lower() not in key_names]


def _write(session: SparkSession, planned: PlannedHistory, state: TargetState, actions: DataFrame) -> int:
    """Write the staged plan in one commit; returns the rows a replacing bootstrap removed."""
    target, keys, columns = planned.target, planned.keys, planned.data_columns
    if not state.exists:
        WRITER.create(
            written_columns(actions, columns),
            target,
            rows=planned.stats.opened,
            record=planned.record,
            deletion_vectors=planned.deletion_vectors,
        )
        return 0
    if planned.replace:
        previous = WRITER.rows(target)
        WRITER.save(
            written_columns(actions, columns), target, mode="overwrite", schema="replace", record=planned.record
        )
        return previous
    if planned.rewrite:
        rewrite_plan(session, actions, target, keys, columns, planned.null_keys, planned.record)
    else:
        name = WRITER.register(session, target)
        within = within_bounds(name, bounds_of(planned.key_spans, state))
        merge_plan(actions, name, keys, columns, planned.null_keys, within)
    return 0
