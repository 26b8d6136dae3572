"""The key-range rule (sharesync.sync.planning.key_ranges): bounds never hide a row the batch can match.

The reference is plain Python: a target row can match when some batch row equals it in every key
column — NULL-safe when the batch holds a NULL key (as the MERGE matches), plain ``=`` otherwise.
Every such row must satisfy every bound under SQL's three-valued logic (only TRUE passes).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharesync.sync.planning.key_ranges import KeyBound, KeySpan, key_bounds, key_spans, misses_every_file, span_of

KINDS = {  # a key column's Arrow type, Delta type, and values
    "int": (pa.int64(), "long", st.integers(-(2**63), 2**63 - 1)),
    "small": (pa.int16(), "integer", st.integers(-(2**15), 2**15 - 1)),
    "str": (pa.string(), "string", st.text(st.characters(exclude_categories=["Cs"]), max_size=4)),
    "date": (pa.date32(), "date", st.dates()),
}


def _passes(bound: KeyBound, value: Any) -> bool:
    """The bound's condition on one target value is TRUE (NULL and FALSE both fail)."""
    if value is None:
        return bound.or_null
    return bound.low is not None and bound.low <= value <= bound.high  # type: ignore[operator]


def _can_match(row: Sequence[Any], batch: Sequence[Sequence[Any]], null_safe: bool) -> bool:
    def equal(a: Any, b: Any) -> bool:
        return a == b if a is not None and b is not None else null_safe and a is None and b is None

    return any(all(equal(a, b) for a, b in zip(row, other, strict=True)) for other in batch)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    kinds = draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3))
    value = st.tuples(*[st.none() | KINDS[k][2] for k in kinds])
    batch = draw(st.lists(value, max_size=8))
    # target rows: some drawn freely, some copied from the batch (they must stay reachable)
    target = draw(st.lists(value, max_size=8)) + draw(
        st.lists(st.sampled_from(batch), max_size=4) if batch else st.just([])
    )
    return kinds, batch, target


@settings(max_examples=150, deadline=None)
@given(cases())
def test_every_target_row_the_batch_can_match_satisfies_the_bounds(
    case: tuple[list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]],
) -> None:
    kinds, batch, target = case
    names = [f"k{i}" for i in range(len(kinds))]
    table = pa.table(
        {n: pa.array([row[i] for row in batch], KINDS[k][0]) for i, (n, k) in enumerate(zip(names, kinds, strict=True))}
    )
    bounds = key_bounds(key_spans(table, names), {n.lower(): KINDS[k][1] for n, k in zip(names, kinds, strict=True)})
    null_safe = any(v is None for row in batch for v in row)
    position = {n: i for i, n in enumerate(names)}
    for row in target:
        if _can_match(row, batch, null_safe):
            assert all(_passes(b, row[position[b.column]]) for b in bounds), (row, bounds)
    if not batch:
        assert bounds == ()
    else:  # every column gets a bound (all these types have exact literals)
        assert [b.column for b in bounds] == names


def _spans(column: pa.Array) -> tuple[KeySpan, ...]:
    return key_spans(pa.table({"k": column}), ["k"])


def test_a_narrow_batch_bounds_each_key_by_its_smallest_and_largest() -> None:
    spans = key_spans(pa.table({"a": pa.array([5, 3, 9]), "b": pa.array(["x", "c", "m"])}), ["a", "b"])
    assert key_bounds(spans, {"a": "long", "b": "string"}) == (
        KeyBound("a", 3, 9, or_null=False),
        KeyBound("b", "c", "x", or_null=False),
    )


def test_a_key_the_batch_holds_null_keeps_null_target_rows() -> None:
    assert key_bounds(_spans(pa.array([None, 4, 2])), {"k": "long"}) == (KeyBound("k", 2, 4, or_null=True),)
    assert key_bounds(_spans(pa.array([None, None], pa.int64())), {"k": "long"}) == (
        KeyBound("k", None, None, or_null=True),
    )


def test_an_empty_batch_gives_no_bounds() -> None:
    assert key_bounds(_spans(pa.array([], pa.int64())), {"k": "long"}) == ()


@pytest.mark.parametrize(
    ("column", "delta_type"),
    [
        (pa.array([1.5, float("nan")]), "double"),  # NaN sorts above every number; -0.0 = 0.0
        (pa.array([b"a", b"b"]), "binary"),
        (pa.array([Decimal("1.10"), Decimal("2.25")]), "decimal(10,2)"),
        (pa.array([datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)]), "timestamp"),  # the session's zone
        (pa.array([2**64 - 1], pa.uint64()), "long"),
        (pa.array([1, 2]), "string"),  # types of different families: the engine would cast
        (pa.array(["1", "2"]), "long"),
        (pa.array([True, False]), "boolean"),
    ],
)
def test_keys_without_an_exact_literal_get_no_bound(column: pa.Array, delta_type: str) -> None:
    assert key_bounds(_spans(column), {"k": delta_type}) == ()


def test_a_column_the_target_lacks_or_spells_otherwise() -> None:
    spans = _spans(pa.array([1, 2]))
    assert key_bounds(spans, {}) == ()
    assert key_bounds(spans, {"k": {"type": "struct", "fields": []}}) == ()
    upper = key_spans(pa.table({"ID": pa.array([1, 2])}), ["ID"])
    assert key_bounds(upper, {"id": "long"}) == (KeyBound("ID", 1, 2, or_null=False),)


def test_a_span_over_several_kinds_of_action() -> None:
    parts = [pa.array([7, None]), pa.chunked_array([[3], [5]]), pa.array([], pa.int64())]
    assert span_of("k", parts) == KeySpan("k", "int64", 3, 7, has_null=True)
    mixed = span_of("k", [pa.array([1], pa.int32()), pa.array([2], pa.int64())])
    assert key_bounds([mixed], {"k": "long"}) == ()  # parts read with different types: no bound
    empty_of_another_type = span_of("k", [pa.array([1], pa.int32()), pa.array([], pa.int64())])
    assert key_bounds([empty_of_another_type], {"k": "long"}) == (KeyBound("k", 1, 1, or_null=False),)


# ---------------------------------------------------------------- batches no target file can hold


def _files(*ranges: tuple[object, object] | None) -> list[dict[str, tuple[object, object] | None]]:
    return [{"id": extremes} for extremes in ranges]


@pytest.mark.parametrize(
    ("bound", "files", "missed"),
    [
        (KeyBound("id", 101, 200, False), _files((1, 50), (51, 100), (201, 300)), True),
        (KeyBound("id", 101, 200, False), _files((1, 50), (90, 150)), False),  # one file overlaps
        (KeyBound("id", 101, 200, False), _files((1, 50), None), False),  # no statistics: may hold anything
        (KeyBound("id", 101, 200, True), _files((1, 50)), False),  # NULL keys match NULL-safe
        (KeyBound("id", "m", "z", False), _files(("a", "b")), False),  # string statistics may be truncated
        (KeyBound("id", datetime.date(2026, 2, 1), datetime.date(2026, 3, 1), False),
         _files((datetime.date(2025, 1, 1), datetime.date(2026, 1, 31))), True),
        (KeyBound("id", 101, 200, False), _files(("1", "50")), False),  # values that do not compare
        (KeyBound("id", 101, 200, False), [], True),  # no files: nothing to hold them
    ],
)  # fmt: skip
def test_a_batch_misses_every_file_only_when_each_file_s_statistics_exclude_it(
    bound: KeyBound, files: list[dict[str, tuple[object, object] | None]], missed: bool
) -> None:
    assert misses_every_file([bound], files) is missed


def test_one_key_column_outside_a_file_is_enough() -> None:
    bounds = [KeyBound("region", "eu", "us", False), KeyBound("id", 10, 20, False)]
    assert misses_every_file(bounds, [{"region": ("eu", "us"), "id": (30, 40)}])
    assert not misses_every_file(bounds, [{"region": ("eu", "us"), "id": (15, 40)}])
    assert not misses_every_file([], [{"id": (30, 40)}])  # no bound: nothing is known
