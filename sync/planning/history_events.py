"""The vectorised steps of history planning (:mod:`sharesync.sync.planning.history_plan`), in Arrow.

A batch of a million change rows is planned without a Python loop over them: events are sorted
once by key and version, and every "per key, in version order" rule becomes a comparison with
the previous or next row of that order; what the target holds per key is found by a hash join.
Keys compare NULL-safe (NULL keys form one key), as in :mod:`sharesync.sync.staging.netting`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, UPSERT_TYPES, ChangeType
from sharesync.sync.core.history_columns import IS_CURRENT, VALID_FROM_VERSION, VALID_TO_VERSION

__all__ = [
    "applicable_events",
    "constant",
    "key_watermarks",
    "net_versions",
    "positions",
    "rows_equal",
    "segments",
    "view_watermarks",
]

# Columns of the narrow tables passed between the steps.
VER, TS, UPSERT, ROW = "__ss_version", "__ss_ts", "__ss_upsert", "__ss_row"  # event: version, time, kind, change row
POS, OPEN, GID, WM = "__ss_pos", "__ss_open", "__ss_gid", "__ss_wm"  # a row; the key's open view row, group, watermark
_RANK = "__ss_rank"
_NO_ROW = pa.scalar(None, pa.int64())


def positions(n: int) -> pa.Array:
    """0, 1, …, n-1 as int64 (the indices of an all-NULL array, without a Python loop)."""
    return pc.cast(pc.indices_nonzero(pc.is_null(pa.nulls(n, pa.int8()))), pa.int64())


def constant(n: int, value: object, kind: pa.DataType) -> pa.Array:
    return pa.repeat(pa.scalar(value, kind), n)


def net_versions(changes: pa.Table, keys: Sequence[str], kept: pa.Array | pa.ChunkedArray | None) -> pa.Table:
    """One event per key and version — keys, GID, VER, TS, UPSERT, ROW (its change row) — in key order.

    The winner within a version follows the netting rule; ``kept`` (the user's filter) then
    turns a winning upsert that fails it into a delete, as merge mode does with its net change.
    GID numbers the keys in order (with gaps).
    """
    change = changes[CHANGE_TYPE]
    is_upsert = pc.is_in(change, value_set=pa.array(UPSERT_TYPES, pa.string()))
    rank = pc.if_else(is_upsert, 0, pc.if_else(pc.equal(change, ChangeType.DELETE.value), 1, 2))
    upsert = is_upsert if kept is None else pc.and_(is_upsert, pc.fill_null(kept, False))
    narrow = pa.table(
        {
            **{k: changes[k] for k in keys},
            VER: pc.cast(changes[COMMIT_VERSION], pa.int64()),
            _RANK: rank,
            TS: changes[COMMIT_TIMESTAMP],
            UPSERT: pc.fill_null(upsert, False),
            ROW: positions(changes.num_rows),
        }
    )
    order = [(k, "ascending") for k in keys] + [(VER, "ascending"), (_RANK, "ascending")]
    ordered = narrow.take(pc.sort_indices(narrow, sort_keys=order))  # stable: ties keep file order
    new_key = _starts(ordered, keys)
    gid = pc.subtract(pc.cumulative_sum(pc.cast(new_key, pa.int64())), 1)
    ordered = ordered.drop_columns([_RANK]).append_column(GID, gid)
    return ordered.filter(pc.or_(new_key, _starts(ordered, [VER])))


def key_watermarks(view: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Per key of the target (NULL keys group as one): its watermark (WM: the newest version any
    of its rows opened or closed at) and its open row (OPEN: the view row, or NULL)."""
    current = pc.fill_null(view[IS_CURRENT], False)
    rows = pa.table(
        {
            **{k: view[k] for k in keys},
            WM: pc.max_element_wise(view[VALID_FROM_VERSION], view[VALID_TO_VERSION], skip_nulls=True),
            OPEN: pc.if_else(current, positions(view.num_rows), _NO_ROW),
        }
    )
    per_key = rows.group_by(list(keys), use_threads=False).aggregate([(WM, "max"), (OPEN, "max")])
    return per_key.rename_columns({f"{WM}_max": WM, f"{OPEN}_max": OPEN}).select([*keys, WM, OPEN])


def applicable_events(per_key: pa.Table, events: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The events above their key's watermark (``per_key``: :func:`key_watermarks`), each with
    OPEN (the key's open view row, or NULL), in key then version order."""
    wm, open_row = _lookup(per_key, events, keys, [WM, OPEN])
    out = events.select([GID, VER, TS, UPSERT, ROW]).append_column(OPEN, open_row)
    return out.filter(pc.fill_null(pc.greater(out[VER], wm), True))


def view_watermarks(per_key: pa.Table, view: pa.Table, keys: Sequence[str]) -> pa.Array:
    """Each view row's key's watermark."""
    return _lookup(per_key, view, keys, [WM])[0]


def _lookup(per_key: pa.Table, rows: pa.Table, keys: Sequence[str], wanted: Sequence[str]) -> list[pa.Array]:
    """``per_key``'s ``wanted`` columns for each of ``rows`` by key (NULL where the key has none),
    in the order of ``rows``: a hash join, then each result scattered back to its row."""
    probe, build = _hash_keys(keys, rows, per_key)
    found = pa.table({**probe, POS: positions(rows.num_rows)}).join(
        pa.table({**build, **{c: per_key[c] for c in wanted}}), list(probe), join_type="left outer"
    )
    at = found[POS].combine_chunks()
    return [pc.scatter(found[c].combine_chunks(), at) for c in wanted]


def _hash_keys(keys: Sequence[str], *tables: pa.Table) -> list[dict[str, pa.Array | pa.ChunkedArray]]:
    """The tables' keys as hash-join keys that match NULL with NULL, as history keys do (a hash
    join never matches NULLs): a key with NULLs in any table becomes an is-NULL flag plus its
    values with NULLs filled by one value of that key, the same in every table."""
    out: list[dict[str, pa.Array | pa.ChunkedArray]] = [{} for _ in tables]
    for i, name in enumerate(keys):
        columns = [t[name] for t in tables]
        if not any(c.null_count for c in columns):
            for o, c in zip(out, columns, strict=True):
                o[f"__ss_k{i}"] = c
            continue
        fill = next((c.drop_null()[0] for c in columns if c.null_count < len(c)), None)
        for o, c in zip(out, columns, strict=True):
            o[f"__ss_n{i}"] = pc.is_null(c)
            if fill is not None:  # else every value is NULL: the flag alone is the key
                o[f"__ss_k{i}"] = pc.fill_null(c, fill)
    return out


def segments(events: pa.Table, changes: pa.Table, view: pa.Table, tracked: Sequence[str] | None) -> pa.Table:
    """One row per stretch of a key's history that this batch writes.

    A stretch starts at an event that opens a row (an upsert not in place) or closes one (a
    delete); in-place updates extend the stretch before them — at a key's first event, the
    target's open row. Columns: VER, TS and UPSERT of its first event, OPEN, ``first`` (it starts
    at the key's first event), ``in_place`` (it continues the open row), ``last_row`` (the
    change row of its last image) and ``end_version``/``end_ts`` (the next stretch's start).
    """
    n = events.num_rows
    gid = events[GID].combine_chunks()
    first = pc.fill_null(pc.not_equal(gid, _shift(gid, 1)), True)
    upsert = events[UPSERT].combine_chunks()
    open_before = pc.if_else(first, pc.is_valid(events[OPEN]), pc.fill_null(_shift(upsert, 1), False))
    in_place = pc.and_(upsert, open_before)
    if tracked is None:
        in_place = constant(n, False, pa.bool_())
    elif tracked:  # tracking no column but the keys: every upsert onto an open row is in place
        in_place = pc.and_(in_place, _same_tracked(events, changes, view, tracked, first))
    starts = pc.cast(pc.indices_nonzero(_array(pc.or_(first, pc.invert(in_place)))), pa.int64())
    following = _shift(starts, -1)
    lasts = pc.subtract(pc.fill_null(following, n), 1)
    same_key = pc.fill_null(pc.equal(pc.take(gid, following), pc.take(gid, starts)), False)
    end_at = pc.if_else(same_key, following, _NO_ROW)
    return pa.table(
        {
            VER: pc.take(events[VER], starts),
            TS: pc.take(events[TS], starts),
            UPSERT: pc.take(upsert, starts),
            OPEN: pc.take(events[OPEN], starts),
            "first": pc.take(first, starts),
            "in_place": pc.take(in_place, starts),
            "last_row": pc.take(events[ROW], lasts),
            "end_version": pc.take(events[VER], end_at),
            "end_ts": pc.take(events[TS], end_at),
        }
    )


def _same_tracked(
    events: pa.Table, changes: pa.Table, view: pa.Table, tracked: Sequence[str], first: pa.Array
) -> pa.Array:
    """Whether each event's tracked values equal those of the image before it: the previous
    event's, or at a key's first event the open target row's."""
    columns = list(tracked)
    mine = changes.select(columns).take(events[ROW])
    pool = pa.concat_tables([changes.select(columns), view.select(columns).cast(changes.select(columns).schema)])
    previous = _shift(events[ROW].combine_chunks(), 1)
    in_view = pc.add(events[OPEN], changes.num_rows)
    return rows_equal(mine, pool.take(pc.if_else(first, in_view, previous)))


def rows_equal(left: pa.Table, right: pa.Table) -> pa.Array:
    """Row-wise equality of two tables with the same columns; NULL equals NULL, NaN equals NaN."""
    same = constant(left.num_rows, True, pa.bool_())
    for name in left.column_names:
        same = pc.and_(same, _same(left[name].combine_chunks(), right[name].combine_chunks()))
    return same


def _same(a: pa.Array, b: pa.Array) -> pa.Array:
    try:
        equal = pc.fill_null(pc.equal(a, b), False)
    except pa.ArrowNotImplementedError:  # nested types: compared as Python values
        return pa.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], pa.bool_())
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    if pa.types.is_floating(a.type):
        both_null = pc.or_(both_null, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    return pc.or_(equal, both_null)


def _starts(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """True where a row's values in ``columns`` differ (NULL-safe) from the previous row's."""
    n = table.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    same = constant(n - 1, True, pa.bool_())
    for name in columns:
        column = table[name].combine_chunks()
        same = pc.and_(same, _same(column.slice(1), column.slice(0, n - 1)))
    return pa.concat_arrays([pa.array([True]), pc.invert(same)])


def _shift(values: pa.Array, by: int) -> pa.Array:
    """``values`` moved down (``by`` = 1: each row sees the previous) or up (-1), NULL-filled."""
    n = len(values)
    if n == 0:
        return values
    if by > 0:
        return pa.concat_arrays([pa.nulls(1, values.type), values.slice(0, n - 1)])
    return pa.concat_arrays([values.slice(1), pa.nulls(1, values.type)])


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One contiguous array: some kernels (``indices_nonzero`` on a chunked array without chunks,
    pyarrow 23) crash on a chunked input."""
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
