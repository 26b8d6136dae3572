"""The record a target's commits carry, read back with deltalake (written by deltalake here: no
engine needed; the end-to-end test reads what Sail and Spark write, tests/e2e/test_state_store_loss.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, write_deltalake

from sharesync.pipelines.targets.delta.commit_record import read_record
from sharesync.pipelines.targets.record import CommitRecord
from sharesync.sync.core.location import locate


def _record(table: str, start: int, end: int) -> CommitRecord:
    return CommitRecord.model_validate(
        {
            "table": table,
            "tableId": "t-1",
            "from": start,
            "to": end,
            "mode": "append",
            "schema": "f",
            "committedMs": 1000,
        }
    )


def _write(path: Path, metadata: str | None, mode: str = "append") -> None:
    data = pa.table({"id": [1]})
    props = CommitProperties(custom_metadata={"userMetadata": metadata}) if metadata else None
    write_deltalake(str(path), data, mode=mode, commit_properties=props)  # type: ignore[arg-type]


def test_the_newest_record_of_the_table_is_read_past_commits_of_other_writers(tmp_path: Path) -> None:
    target = tmp_path / "t"
    _write(target, _record("p/s.x.t", 2, 2).encode())
    _write(target, _record("p/s.x.t", 3, 5).encode())
    _write(target, None)  # another writer's commit (no record) after it
    _write(target, "someone else's text")
    found = read_record(locate(str(target)), "p/s.x.t")
    assert found is not None
    assert (found.record.start, found.record.end, found.at_version, found.target_version) == (3, 5, 1, 3)
    assert found.record.committed is not None and found.record.committed.timestamp() == 1.0
    assert read_record(locate(str(tmp_path / "missing")), "p/s.x.t") is None


def test_a_record_of_another_table_or_one_before_a_restore_is_not_trusted(tmp_path: Path) -> None:
    other = tmp_path / "other"
    _write(other, _record("p/s.x.t", 2, 2).encode())
    _write(other, _record("p/s.x.OTHER", 2, 4).encode(), mode="overwrite")  # replaced by another table's target
    assert read_record(locate(str(other)), "p/s.x.t") is None
    restored = tmp_path / "restored"
    _write(restored, _record("p/s.x.t", 2, 2).encode())
    _write(restored, _record("p/s.x.t", 3, 4).encode())
    DeltaTable(str(restored)).restore(0)  # its rows are the first batch's again: the records cannot say so
    assert read_record(locate(str(restored)), "p/s.x.t") is None


def test_a_record_round_trips_through_its_json_and_garbage_is_no_record() -> None:
    record = _record("p/s.x.t", 3, 5)
    assert CommitRecord.decode(record.encode()) == record
    assert '"from":3' in record.encode() and '"to":5' in record.encode()
    for text in (None, 7, "", "sharesync", '{"sharesync": 1}', '{"sharesync": {"table": "x"}}', "[1]"):
        assert CommitRecord.decode(text) is None
