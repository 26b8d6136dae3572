"""History planning (:mod:`sharesync.sync.planning.history_plan`), checked against a plain-Python model.

Any split of a run of versions into consecutive batches must give the history the model builds
one version at a time; re-applying a batch must plan nothing; a backfill replaying the same
changes must give the same history back; a snapshot closes every open row and opens its own.
Plans are applied to rows by :func:`support.history.apply_actions`, as the MERGE applies them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.history import HISTORY, HistoryModel, Row, apply_actions, sort_history

from sharesync.sync.core.errors import TargetError
from sharesync.sync.planning.history_plan import HistoryPlan, SnapshotAt, plan_history

T0 = datetime(2024, 1, 1, tzinfo=UTC)
KEYS = ["id"]
COLUMNS = ["id", "a", "b"]
DATA = [("id", pa.int64()), ("a", pa.string()), ("b", pa.int64())]
TS = pa.timestamp("us", tz="UTC")
CHANGES = pa.schema([*DATA, ("_change_type", pa.string()), ("_commit_version", pa.int64()), ("_commit_timestamp", TS)])
TARGET = pa.schema(
    [*DATA, *[(c, pa.int64()) for c in HISTORY[:2]], *[(c, TS) for c in HISTORY[2:4]], (HISTORY[4], pa.bool_())]
)
TRACKINGS: list[list[str] | None] = [None, ["a"], []]


def at(version: int) -> datetime:
    return T0 + timedelta(hours=version)


def change(kind: str, version: int, id: int | None, a: str | None = None, b: int | None = None) -> Row:
    return {
        "id": id,
        "a": a,
        "b": b,
        "_change_type": kind,
        "_commit_version": version,
        "_commit_timestamp": at(version),
    }


_row = st.tuples(
    st.sampled_from(["insert", "update", "delete", "update_preimage"]),
    st.sampled_from([0, 1, 2, None]),
    st.sampled_from(["x", "y", None]),
    st.integers(0, 2),
)
# versions[i] holds the change rows of version i + 1 (an empty version is a commit without data changes)
_versions = st.lists(st.lists(_row, max_size=4), min_size=1, max_size=7)


def rows_of(versions: list[list[tuple[Any, ...]]], first: int = 1) -> list[Row]:
    out: list[Row] = []
    for offset, changes in enumerate(versions):
        v = first + offset
        for kind, id, a, b in changes:
            if kind == "update":  # a provider's update: preimage (old values unknown here) + postimage
                out += [change("update_preimage", v, id), change("update_postimage", v, id, a, b)]
            else:
                out.append(change(kind, v, id, a, b))
    return out


def plan(rows: list[Row], target: list[Row], tracked: list[str] | None, **options: Any) -> HistoryPlan:
    table = pa.Table.from_pylist(target, TARGET) if target else None
    return plan_history(pa.Table.from_pylist(rows, CHANGES), table, KEYS, COLUMNS, tracked=tracked, **options)


def apply(rows: list[Row], target: list[Row], tracked: list[str] | None, **options: Any) -> list[Row]:
    return apply_actions(target, plan(rows, target, tracked, **options).actions.to_pylist(), KEYS, COLUMNS)


def model_of(rows: list[Row], last: int, tracked: list[str] | None, model: HistoryModel | None = None) -> HistoryModel:
    model = model or HistoryModel(KEYS, COLUMNS, tracked)
    for v in sorted({r["_commit_version"] for r in rows}):
        model.apply_version(v, at(v), [r for r in rows if r["_commit_version"] == v])
    return model


def in_batches(rows: list[Row], cuts: list[int], last: int) -> list[list[Row]]:
    bounds = [0, *sorted(set(cuts)), last]
    return [[r for r in rows if lo < r["_commit_version"] <= hi] for lo, hi in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=_versions, cuts=st.lists(st.integers(1, 7), max_size=4), tracked=st.sampled_from(TRACKINGS))
def test_any_split_into_batches_gives_the_history_of_one_version_at_a_time(
    versions: list[list[tuple[Any, ...]]], cuts: list[int], tracked: list[str] | None
) -> None:
    rows, last = rows_of(versions), len(versions)
    target: list[Row] = []
    for batch in in_batches(rows, [c for c in cuts if c < last], last):
        target = apply(batch, target, tracked)
        assert plan(batch, target, tracked).is_empty  # re-applied after a crash: nothing to do
    one_by_one: list[Row] = []
    for version in in_batches(rows, list(range(1, last)), last):
        one_by_one = apply(version, one_by_one, tracked)
    assert sort_history(target, KEYS) == sort_history(one_by_one, KEYS) == model_of(rows, last, tracked).sorted_rows()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=_versions, start=st.integers(1, 7), tracked=st.sampled_from(TRACKINGS))
def test_a_backfill_replaying_the_same_changes_gives_the_same_history(
    versions: list[list[tuple[Any, ...]]], start: int, tracked: list[str] | None
) -> None:
    rows, last = rows_of(versions), len(versions)
    start = min(start, last)
    target = apply(rows, [], tracked)
    replayed = [r for r in rows if r["_commit_version"] >= start]
    again = apply(replayed, target, tracked, replay_from=start)
    assert sort_history(again, KEYS) == sort_history(target, KEYS)
    # Replaying only up to a version leaves the model's history stopped there — but for untracked
    # columns: updated in place, they keep their newest value until the next sync replays it.
    upto = [r for r in replayed if r["_commit_version"] <= start]
    partial = apply(upto, target, tracked, replay_from=start)
    expected = model_of([r for r in rows if r["_commit_version"] <= start], start, tracked).sorted_rows()
    untracked = {"b"} if tracked == ["a"] else {"a", "b"} if tracked == [] else set()
    assert without(sort_history(partial, KEYS), untracked) == without(expected, untracked)


def without(rows: list[Row], columns: set[str]) -> list[Row]:
    return [{k: v for k, v in row.items() if k not in columns} for row in rows]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=_versions, snapshot=st.lists(_row, max_size=4), tracked=st.sampled_from(TRACKINGS))
def test_a_re_bootstrap_closes_every_open_row_and_opens_the_snapshot(
    versions: list[list[tuple[Any, ...]]], snapshot: list[tuple[Any, ...]], tracked: list[str] | None
) -> None:
    rows, last = rows_of(versions), len(versions)
    target = apply(rows, [], tracked)
    at_version = last + 1
    snap = [change("insert", at_version, id, a, b) for _, id, a, b in snapshot]
    after = apply(snap, target, tracked, snapshot=SnapshotAt(at_version, at(at_version)))
    model = model_of(rows, last, tracked)
    model.snapshot(at_version, at(at_version), snap)
    assert sort_history(after, KEYS) == model.sorted_rows()
    assert plan(snap, after, tracked, snapshot=SnapshotAt(at_version, at(at_version))).is_empty


def test_an_untracked_change_updates_the_open_row_in_place() -> None:
    rows = [
        change("insert", 1, 1, "x", 1),
        change("update_postimage", 2, 1, "x", 2),  # b only: in place
        change("update_postimage", 3, 1, "y", 2),  # a: a new row
        change("update_postimage", 4, 1, "y", 3),  # b only: in place, on the row opened at 3
    ]
    target = apply(rows[:2], [], ["a"])
    assert [(r["b"], r["_sharesync_valid_from_version"]) for r in target] == [(2, 1)]
    target = apply(rows[2:], target, ["a"])
    assert [(r["a"], r["b"], r[HISTORY[0]], r[HISTORY[1]]) for r in sort_history(target, KEYS)] == [
        ("x", 2, 1, 3),
        ("y", 3, 3, None),
    ]
    assert plan(rows[2:], target, ["a"]).is_empty


def test_a_filtered_out_image_closes_the_row_and_counts_are_reported() -> None:
    rows = [change("insert", 1, 1, "x", 1), change("update_postimage", 2, 1, "x", 9), change("insert", 2, 2, "y", 1)]
    first = plan(rows[:1], [], None)
    assert (first.opened, first.closed, first.updated) == (1, 0, 0)
    target = apply_actions([], first.actions.to_pylist(), KEYS, COLUMNS)
    keep = pa.array([r["b"] < 5 for r in rows[1:]])
    second = plan(rows[1:], target, None, kept=keep)
    assert (second.opened, second.closed, second.updated, second.removed) == (1, 1, 1, 0)


def test_a_snapshot_older_than_the_history_is_refused() -> None:
    target = apply([change("insert", 7, 1, "x", 1)], [], None)
    with pytest.raises(TargetError, match="sharesync reset"):
        plan([change("insert", 3, 1, "x", 1)], target, None, snapshot=SnapshotAt(3, at(3)))


def test_keys_of_several_columns_compare_null_safe() -> None:
    keys, rows = (
        ["id", "a"],
        [
            change("insert", 1, 1, None, 1),
            change("insert", 1, 1, "x", 1),
            change("update_postimage", 2, 1, None, 2),
            change("delete", 3, 1, "x", 1),
        ],
    )
    table = pa.Table.from_pylist(rows, CHANGES)
    first = plan_history(table.slice(0, 2), None, keys, COLUMNS)
    target = apply_actions([], first.actions.to_pylist(), keys, COLUMNS)
    second = plan_history(table.slice(2), pa.Table.from_pylist(target, TARGET), keys, COLUMNS)
    assert second.null_keys
    after = apply_actions(target, second.actions.to_pylist(), keys, COLUMNS)
    model = HistoryModel(keys, COLUMNS)
    for v in (1, 2, 3):
        model.apply_version(v, at(v), [r for r in rows if r["_commit_version"] == v])
    assert sort_history(after, keys) == model.sorted_rows()
