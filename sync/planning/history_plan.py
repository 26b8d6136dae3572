"""History mode's plan for one batch: the target rows it opens, closes, updates in place or removes.

Pure Arrow, no engine and no I/O: the job (:mod:`sharesync.pipelines.modes.history.history`) reads the
staged batch and the target's rows, and writes the plan's actions in one commit.

Per key, version by version — no netting across versions. Within one version the winning image
is chosen as :mod:`sharesync.sync.staging.netting` does (an upsert beats a delete, which beats a
preimage); an upsert that fails the user's filter counts as a delete. An upsert closes the key's
open row at its version and opens a new one; a delete closes it. With a tracked-column list, an
upsert that changes no tracked column updates the open row in place instead.

Exactly once: a key's *watermark* is the newest version any of its target rows opened or closed
at; its events at or below it were applied by an earlier commit and are skipped, so a batch
re-applied after a crash plans nothing. An in-place update does not move the watermark, so a
trailing one comes back on a re-apply — with the values the row already holds, and is dropped as
no change. (That relies on the checkpoint: only the batch after it is ever re-applied.)

``replay_from`` (a backfill) first rewrites history from that version on — rows opened at or
after it go, rows closed at or after it are open again — then applies the batch. In-place updates
are not undone: a reopened row keeps its untracked columns' newest values, which the replay
writes again when it reaches them. A ``snapshot`` (a bootstrap) closes every open row at the
snapshot's version and opens the snapshot's rows, all at its version and commit time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

import pyarrow as pa
import pyarrow.compute as pc

from sharesync.sync.core.changefeed import COMMIT_TIMESTAMP, COMMIT_VERSION
from sharesync.sync.core.errors import TargetError
from sharesync.sync.core.history_columns import (
    IS_CURRENT,
    VALID_FROM,
    VALID_FROM_VERSION,
    VALID_TO,
    VALID_TO_VERSION,
)
from sharesync.sync.planning.history_events import (
    OPEN,
    POS,
    ROW,
    TS,
    UPSERT,
    VER,
    applicable_events,
    constant,
    key_watermarks,
    net_versions,
    positions,
    rows_equal,
    segments,
    view_watermarks,
)
from sharesync.sync.planning.key_ranges import KeySpan, span_of

__all__ = ["ACTION", "MATCH_VERSION", "SET_VALUES", "Action", "HistoryPlan", "SnapshotAt", "plan_history"]

ACTION = "__ss_action"  # what the writer does with the row: one of Action
MATCH_VERSION = "__ss_match_version"  # update/delete: the VALID_FROM_VERSION of the target row meant
SET_VALUES = "__ss_set_values"  # update: the data columns change too (an in-place update)
_REOPENED = "__ss_reopened"
_NO_ROW = pa.scalar(None, pa.int64())


class Action:
    INSERT = "insert"  # a new row; MATCH_VERSION is NULL, so it matches no target row
    UPDATE = "update"  # the target row (keys, MATCH_VERSION) gets new validity (and values if SET_VALUES)
    DELETE = "delete"  # the target row (keys, MATCH_VERSION) goes: history a backfill rewrites


@dataclass(frozen=True)
class SnapshotAt:
    """A bootstrap batch: the snapshot's version and commit time (None when unknown)."""

    version: int
    timestamp: datetime | None = None


@dataclass(frozen=True)
class _Part:
    """Action rows made on demand: ``build(offset, length)`` gives that slice of them."""

    rows: int
    build: Callable[[int, int], pa.Table]


@dataclass(frozen=True)
class HistoryPlan:
    parts: tuple[_Part, ...]  # inserts, updates, deletes: made a slice at a time by batches()
    opened: int = 0  # new rows
    closed: int = 0  # rows given a valid_to, new rows closed within the batch included
    updated: int = 0  # existing rows changed: closed, reopened or updated in place
    removed: int = 0  # existing rows deleted: history a backfill rewrites
    null_keys: bool = False  # an action's key is NULL: the writer must match NULL-safe
    key_spans: tuple[KeySpan, ...] = ()  # per key, over every action: the MERGE's key bounds

    @property
    def rows(self) -> int:
        return sum(part.rows for part in self.parts)

    @property
    def is_empty(self) -> bool:
        return self.rows == 0

    @property
    def schema(self) -> pa.Schema:
        """The actions' columns: data columns, the five history columns, ACTION, MATCH_VERSION, SET_VALUES."""
        return self.parts[0].build(0, 0).schema

    def batches(self, rows: int = 131_072) -> Iterator[pa.Table]:
        """The actions, ``rows`` at a time: a plan for millions of change rows is never whole in
        memory at full width."""
        for part in self.parts:
            for offset in range(0, part.rows, rows):
                yield part.build(offset, min(rows, part.rows - offset))

    @property
    def actions(self) -> pa.Table:
        """Every action in one table (small plans, tests)."""
        return pa.concat_tables([self.schema.empty_table(), *self.batches()])


def plan_history(
    changes: pa.Table,
    target: pa.Table | None,
    keys: Sequence[str],
    data_columns: Sequence[str],
    *,
    tracked: Sequence[str] | None = None,
    kept: pa.Array | pa.ChunkedArray | None = None,
    replay_from: int | None = None,
    snapshot: SnapshotAt | None = None,
) -> HistoryPlan:
    """The plan for ``changes`` (staged change rows) against ``target`` (its rows; None: no table).

    ``target`` holds the keys, VALID_FROM_VERSION, VALID_TO_VERSION and IS_CURRENT of every row,
    and — with ``tracked`` — the other data columns of the open rows. ``tracked``: the columns
    whose change opens a new row (None: every change does). ``kept``: the user's filter per
    change row (only TRUE keeps). ``data_columns``: the columns written, keys included.
    """
    if snapshot is not None:
        tracked = None  # a bootstrap opens every snapshot row: nothing is known of the gap before it
        changes = _at_snapshot(changes, snapshot)
    values = [c for c in data_columns if c not in keys] if tracked is not None else []
    view, removed = _rewrite_from(_view(target, changes, keys, values), replay_from)
    if snapshot is not None:
        _check_not_behind(view, snapshot.version)
    per_key = key_watermarks(view, keys)
    applicable = applicable_events(per_key, net_versions(changes, keys, kept), keys)
    segs = segments(applicable, changes, view, None if tracked is None else [c for c in tracked if c in values])
    opened = segs.filter(pc.and_(segs[UPSERT], pc.invert(segs["in_place"])))
    opened = opened.take(pc.sort_indices(opened["last_row"]))  # in change-row order: reading their images is sequential
    closing = None if snapshot is None else (snapshot, view_watermarks(per_key, view, keys))
    updates = _updates(view, segs, closing, changes[COMMIT_TIMESTAMP].type)
    if values:
        updates = _drop_unchanged(updates, view, changes, values)
    data = changes.select(list(data_columns))
    ts_type = changes[COMMIT_TIMESTAMP].type
    identity = [*keys, VALID_FROM_VERSION]  # what names an existing row
    changed, removed = view.select(identity).take(updates[POS]), removed.select(identity)
    parts = (
        _Part(opened.num_rows, lambda at, n: _inserts(data, opened.slice(at, n), ts_type)),
        _Part(
            changed.num_rows,
            lambda at, n: _view_actions(data, changed.slice(at, n), updates.slice(at, n), keys, ts_type),
        ),
        _Part(removed.num_rows, lambda at, n: _view_actions(data, removed.slice(at, n), None, keys, ts_type)),
    )
    closed = (
        opened.num_rows - opened["end_version"].null_count + updates.num_rows - updates[VALID_TO_VERSION].null_count
    )
    opened_keys = [pc.take(data[k], opened["last_row"]) for k in keys]
    null_keys = any(c.null_count for c in [*opened_keys, *(t[k] for t in (changed, removed) for k in keys)])
    spans = tuple(span_of(k, [o, changed[k], removed[k]]) for k, o in zip(keys, opened_keys, strict=True))
    return HistoryPlan(parts, opened.num_rows, closed, updates.num_rows, removed.num_rows, null_keys, spans)


def _at_snapshot(changes: pa.Table, snapshot: SnapshotAt) -> pa.Table:
    """Every snapshot row at the snapshot's version and time (staged rows carry their file's time)."""
    n = changes.num_rows
    for name, value in ((COMMIT_VERSION, snapshot.version), (COMMIT_TIMESTAMP, snapshot.timestamp)):
        at = changes.schema.get_field_index(name)
        changes = changes.set_column(at, name, constant(n, value, changes.schema.field(at).type))
    return changes


def _view(target: pa.Table | None, changes: pa.Table, keys: Sequence[str], values: Sequence[str]) -> pa.Table:
    """The target's rows in the batch's column types, each with a reopened flag (False)."""
    rows = 0 if target is None else target.num_rows
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in [*keys, *values]:
        kind = changes.schema.field(name).type
        if target is not None and name in target.column_names:
            columns[name] = target[name].cast(kind)
        else:  # no table yet, or a column the target gains in this batch: NULL in every row it has
            columns[name] = pa.nulls(rows, kind)
    for name, kind in ((VALID_FROM_VERSION, pa.int64()), (VALID_TO_VERSION, pa.int64()), (IS_CURRENT, pa.bool_())):
        columns[name] = pa.nulls(0, kind) if target is None else target[name].cast(kind)
    columns[_REOPENED] = constant(rows, False, pa.bool_())
    return pa.table(columns)


def _rewrite_from(view: pa.Table, replay_from: int | None) -> tuple[pa.Table, pa.Table]:
    """History as it was before ``replay_from``: rows opened since go (returned), rows closed since reopen."""
    if replay_from is None:
        return view, view.slice(0, 0)
    gone = pc.greater_equal(view[VALID_FROM_VERSION], replay_from)
    kept = view.filter(pc.invert(gone))
    reopen = pc.fill_null(pc.greater_equal(kept[VALID_TO_VERSION], replay_from), False)
    replaced = {
        VALID_TO_VERSION: pc.if_else(reopen, _NO_ROW, kept[VALID_TO_VERSION]),
        IS_CURRENT: pc.or_(kept[IS_CURRENT], reopen),
        _REOPENED: reopen,
    }
    for name, column in replaced.items():
        kept = kept.set_column(kept.schema.get_field_index(name), name, column)
    return kept, view.filter(gone)


def _check_not_behind(view: pa.Table, version: int) -> None:
    """A snapshot older than the target's history means the source's versions went backwards."""
    newest = pc.max(pc.max_element_wise(view[VALID_FROM_VERSION], view[VALID_TO_VERSION], skip_nulls=True)).as_py()
    if newest is not None and newest > version:
        raise TargetError(
            f"the target's history reaches source version {newest}, after the snapshot at version {version}: "
            "the source's versions went backwards (the table was re-created or restored), so its history cannot "
            "continue in this target. Run 'sharesync reset --discard-target' for this table to start a new history "
            "(the old one is removed), or point 'target' at a new path"
        )


def _updates(
    view: pa.Table, segs: pa.Table, closing: tuple[SnapshotAt, pa.Array] | None, ts_type: pa.DataType
) -> pa.Table:
    """Target rows to change: POS in the view, new VALID_TO_VERSION / VALID_TO, ROW (new values) or NULL.

    ``closing`` (a bootstrap): the snapshot and each view row's key's watermark."""
    first = segs.filter(pc.and_(segs["first"], pc.is_valid(segs[OPEN])))
    in_place = first["in_place"]  # the key's first events only refresh the open row's values
    touched = pa.table(
        {
            POS: first[OPEN],
            VALID_TO_VERSION: pc.if_else(in_place, first["end_version"], first[VER]),
            VALID_TO: pc.if_else(in_place, first["end_ts"], first[TS]),
            ROW: pc.if_else(in_place, first["last_row"], _NO_ROW),
        }
    )
    parts = [touched]
    n = view.num_rows
    untouched = pc.is_null(
        pc.scatter(constant(touched.num_rows, True, pa.bool_()), touched[POS].combine_chunks(), n - 1)
    )
    if closing is not None:  # keys the snapshot lacks: their open rows close at its version
        snapshot, view_wm = closing
        below = pc.fill_null(pc.less(view_wm, snapshot.version), True)
        closes = pc.and_(untouched, pc.and_(view[IS_CURRENT], below))
        parts.append(_rows(closes, constant(n, snapshot.version, pa.int64()), constant(n, snapshot.timestamp, ts_type)))
        untouched = pc.and_(untouched, pc.invert(closes))
    reopened = pc.and_(untouched, view[_REOPENED])  # a backfill reopened them and nothing closes them again
    parts.append(_rows(reopened, pa.nulls(n, pa.int64()), pa.nulls(n, ts_type)))
    return pa.concat_tables([part.cast(touched.schema) for part in parts])


def _rows(mask: pa.Array | pa.ChunkedArray, valid_to: pa.Array, valid_to_ts: pa.Array) -> pa.Table:
    n = len(valid_to)
    table = pa.table(
        {POS: positions(n), VALID_TO_VERSION: valid_to, VALID_TO: valid_to_ts, ROW: pa.nulls(n, pa.int64())}
    )
    return table.filter(mask)


def _drop_unchanged(updates: pa.Table, view: pa.Table, changes: pa.Table, values: Sequence[str]) -> pa.Table:
    """In-place values equal to the row's own are no change; an update with nothing left goes."""
    mine = changes.select(list(values)).take(updates[ROW])
    theirs = view.select(list(values)).take(updates[POS])
    row = pc.if_else(rows_equal(mine, theirs), _NO_ROW, updates[ROW])
    updates = updates.set_column(updates.schema.get_field_index(ROW), ROW, row)
    reopened = pc.take(view[_REOPENED], updates[POS])
    keep = pc.or_(pc.or_(pc.is_valid(row), pc.is_valid(updates[VALID_TO_VERSION])), reopened)
    return updates.filter(keep)


def _inserts(data: pa.Table, opened: pa.Table, ts_type: pa.DataType) -> pa.Table:
    n, end = opened.num_rows, opened["end_version"]
    columns = {
        VALID_FROM_VERSION: opened[VER],
        VALID_TO_VERSION: end,
        VALID_FROM: opened[TS],
        VALID_TO: opened["end_ts"],
        IS_CURRENT: pc.is_null(end),
        ACTION: constant(n, Action.INSERT, pa.string()),
        MATCH_VERSION: pa.nulls(n, pa.int64()),
        SET_VALUES: constant(n, False, pa.bool_()),
    }
    return _with(data.take(opened["last_row"]), columns, ts_type)


def _view_actions(
    data: pa.Table, rows: pa.Table, updates: pa.Table | None, keys: Sequence[str], ts_type: pa.DataType
) -> pa.Table:
    """Updates of ``rows`` (``updates``: their new validity and values) or, without ``updates``, deletes."""
    n = rows.num_rows
    image = data.take(updates[ROW]) if updates is not None else None
    values = {c: rows[c] if c in keys else (image[c] if image is not None else pa.nulls(n)) for c in data.column_names}
    valid_to = updates[VALID_TO_VERSION] if updates is not None else pa.nulls(n, pa.int64())
    columns = {
        VALID_FROM_VERSION: rows[VALID_FROM_VERSION],
        VALID_TO_VERSION: valid_to,
        VALID_FROM: pa.nulls(n, ts_type),
        VALID_TO: updates[VALID_TO] if updates is not None else pa.nulls(n, ts_type),
        IS_CURRENT: pc.is_null(valid_to),
        ACTION: constant(n, Action.DELETE if updates is None else Action.UPDATE, pa.string()),
        MATCH_VERSION: rows[VALID_FROM_VERSION],
        SET_VALUES: pc.is_valid(updates[ROW]) if updates is not None else constant(n, False, pa.bool_()),
    }
    return _with(pa.table(values).cast(data.schema), columns, ts_type)


def _with(data: pa.Table, columns: dict[str, pa.Array | pa.ChunkedArray], ts_type: pa.DataType) -> pa.Table:
    """The data columns, then the history and plan columns, in one schema for every part."""
    types = {VALID_FROM_VERSION: pa.int64(), VALID_TO_VERSION: pa.int64(), VALID_FROM: ts_type, VALID_TO: ts_type}
    for name, values in columns.items():
        data = data.append_column(name, pc.cast(values, types.get(name, values.type)))
    return data
