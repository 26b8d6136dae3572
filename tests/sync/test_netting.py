"""Arrow netting picks the winner per key by the engine's rule, checked against a reference."""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharesync.sync.core.errors import SchemaIncompatible, SyncError
from sharesync.sync.staging.netted import NETTED_FILE, read_netted
from sharesync.sync.staging.netting import net_table, write_netted

RANK = {"insert": 0, "update_postimage": 0, "delete": 1, "update_preimage": 2}


def batch(rows: list[tuple[int | None, int, str, str]]) -> pa.Table:
    keys, versions, kinds, values = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table(
        {
            "id": pa.array(keys, pa.int64()),
            "v": pa.array(values, pa.string()),
            "_change_type": pa.array(kinds, pa.string()),
            "_commit_version": pa.array(versions, pa.int64()),
        }
    )


def reference(rows: list[tuple[int | None, int, str, str]]) -> dict[int | None, tuple[int, str]]:
    """Winner per key: newest version, then insert/postimage > delete > preimage."""
    best: dict[int | None, tuple[int, int, str, str]] = {}
    for key, version, kind, value in rows:
        candidate = (version, -RANK[kind], kind, value)
        if key not in best or candidate[:2] > best[key][:2]:
            best[key] = candidate
    return {k: (v[0], v[2]) for k, v in best.items()}


def test_rules_inside_one_version() -> None:
    rows = [
        (1, 5, "delete", "a"),
        (1, 5, "insert", "b"),  # a rewrite: the add wins
        (2, 5, "update_preimage", "c"),  # a lone preimage: acts as a delete
        (3, 4, "insert", "d"),
        (3, 6, "delete", "d"),  # newest version wins
        (None, 1, "insert", "e"),
        (None, 2, "update_postimage", "f"),
        (None, 2, "update_preimage", "e"),
    ]
    netted = net_table(batch(rows), ["id"]).to_pylist()
    assert {(r["id"], r["_change_type"], r["v"]) for r in netted} == {
        (1, "insert", "b"),
        (2, "update_preimage", "c"),
        (3, "delete", "d"),
        (None, "update_postimage", "f"),
    }


def test_winners_come_in_key_order_with_null_keys_last_and_no_warning() -> None:
    rows = [(None, 1, "insert", "n"), (3, 1, "insert", "c"), (1, 1, "insert", "a"), (2, 1, "delete", "b")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pyarrow deprecations included, not only sharesync's own
        netted = net_table(batch(rows), ["id"])
    assert netted.column("id").to_pylist() == [1, 2, 3, None]


events = st.tuples(
    st.one_of(st.none(), st.integers(0, 6)),
    st.integers(0, 4),
    st.sampled_from(sorted(RANK)),
    st.sampled_from(["x", "y"]),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(events, max_size=40))
def test_netting_matches_the_reference_rule(rows: list[tuple[int | None, int, str, str]]) -> None:
    netted = net_table(batch(rows), ["id"]).to_pylist()
    assert len(netted) == len({r[0] for r in rows})
    expected = reference(rows)
    assert {r["id"]: (r["_commit_version"], r["_change_type"]) for r in netted} == {
        k: (v, kind) for k, (v, kind) in expected.items()
    }


def test_composite_keys_and_the_netted_file(tmp_path: Path) -> None:
    table = pa.table(
        {
            "a": pa.array([1, 1, 1, None, None], pa.int64()),
            "b": pa.array(["x", "x", "y", None, None]),
            "_change_type": ["insert", "update_postimage", "insert", "insert", "delete"],
            "_commit_version": pa.array([1, 2, 1, 1, 3], pa.int64()),
        }
    )
    result = write_netted(table, ["a", "b"], tmp_path)
    assert (result.rows_before, result.rows_after, result.null_keys) == (5, 3, True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [NETTED_FILE]
    rows = pq.read_table(tmp_path / NETTED_FILE).to_pylist()
    assert {(r["a"], r["b"], r["_commit_version"]) for r in rows} == {(1, "x", 2), (1, "y", 1), (None, None, 3)}
    assert read_netted(tmp_path, ["a", "b"]) == result  # read from the file's own record: the rows before netting


def test_the_job_side_only_reads_a_netted_batch_and_refuses_one_not_netted(tmp_path: Path) -> None:
    pq.write_table(batch([(1, 1, "insert", "a"), (1, 2, "delete", "a")]), tmp_path / "part-0.parquet")
    with pytest.raises(SyncError, match="not netted per key; stage it with net_keys"):
        read_netted(tmp_path, ["id"])
    assert [p.name for p in tmp_path.iterdir()] == ["part-0.parquet"]  # nothing written by reading
    pq.write_table(batch([(1, 1, "insert", "a")]), tmp_path / "part-0.parquet")
    (tmp_path / "part-0.parquet").rename(tmp_path / NETTED_FILE)  # named like one, without its record
    with pytest.raises(SyncError, match="not netted per key"):
        read_netted(tmp_path, ["id"])

    netted = write_netted(batch([(1, 1, "insert", "a"), (1, 2, "delete", "a")]), ["id"], tmp_path)
    assert read_netted(tmp_path, ["ID"]) == netted  # configured keys match the batch's columns case-insensitively
    assert (netted.rows_before, netted.rows_after) == (2, 1)


def test_a_key_missing_from_an_older_batch_is_named() -> None:
    batch = pa.table(
        {"id": [1], "_change_type": ["insert"], "_commit_version": pa.array([3], pa.int64())},
    )
    with pytest.raises(SchemaIncompatible, match=r"\['region'\] are missing from the change files"):
        net_table(batch, ["id", "region"])
