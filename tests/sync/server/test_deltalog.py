"""Log replay, the pure helpers behind it (pruning, signing) and the sample tables themselves."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from sharesync.sync.server.deletionvectors import DeletionVector
from sharesync.sync.server.deltalog import DeltaLog
from sharesync.sync.server.file_skipping import apply_limit_hint, prune_by_json_predicate
from sharesync.sync.server.logmodel import FileEntry, LogError, VersionUnavailable, monotonize, parse_commit
from sharesync.sync.server.samples import SAMPLE_SCHEMA, apply_random_commits, create_sample_table, sample_rows
from sharesync.sync.server.signing import SignatureError, Signer


def _names(entries: tuple[FileEntry, ...]) -> set[str]:
    return {Path(e.path).name for e in entries}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = create_sample_table(tmp_path_factory.mktemp("log") / "t", rows=15, seed=4)
    apply_random_commits(path, random.Random(4), 7)
    return path


def test_every_snapshot_matches_deltalake(table: Path) -> None:
    log = DeltaLog(table)
    latest = log.latest_version()
    assert latest == DeltaTable(str(table)).version() == 7
    for version in range(latest + 1):
        expected = {Path(u).name for u in DeltaTable(str(table), version=version).file_uris()}
        assert _names(log.snapshot(version).files) == expected, version


def test_checkpoint_then_cleanup(tmp_path: Path) -> None:
    path = create_sample_table(tmp_path / "t", rows=10, seed=5)
    apply_random_commits(path, random.Random(5), 5)
    DeltaTable(str(path), version=4).create_checkpoint()
    for version in range(4):
        (path / "_delta_log" / f"{version:020d}.json").unlink()
    log = DeltaLog(path)
    assert (log.earliest_version(), log.earliest_change_version(), log.latest_version()) == (4, 4, 5)
    for version in (4, 5):
        expected = {Path(u).name for u in DeltaTable(str(path), version=version).file_uris()}
        assert _names(log.snapshot(version).files) == expected
    with pytest.raises(VersionUnavailable) as caught:
        log.snapshot(3)
    assert (caught.value.earliest, caught.value.latest) == (4, 5)


def test_timestamps_come_from_commit_info_and_increase(table: Path) -> None:
    stamps = DeltaLog(table).timestamps()
    history = {h["version"]: h["timestamp"] for h in DeltaTable(str(table)).history()}
    assert stamps == history
    assert monotonize({0: 10, 1: 10, 2: 5, 3: 40}) == {0: 10, 1: 11, 2: 12, 3: 40}


def test_parse_commit_ignores_unknown_actions_and_falls_back_to_mtime() -> None:
    lines = [
        json.dumps({"add": {"path": "a%20b.parquet", "size": 3, "partitionValues": {}, "dataChange": True}}),
        json.dumps({"futureAction": {"x": 1}}),
        json.dumps({"cdc": {"path": "_change_data/c.parquet", "size": 4, "partitionValues": {}, "dataChange": False}}),
    ]
    commit = parse_commit(7, lines, fallback_timestamp=123)
    assert commit.timestamp == 123 and len(commit.adds) == 1 and len(commit.cdcs) == 1


def test_file_paths_stay_inside_the_table(table: Path) -> None:
    log = DeltaLog(table)
    assert log.file_path("region=eu/./a%20b.parquet") == table / "region=eu" / "a b.parquet"
    for bad in ("../outside.parquet", "/etc/passwd", "s3://bucket/x.parquet"):
        with pytest.raises(LogError, match=r"outside the table|absolute paths"):
            log.file_path(bad)


def _entry(region: str | None, rows: int | None = None) -> FileEntry:
    stats = json.dumps({"numRecords": rows}) if rows is not None else None
    return FileEntry(path=f"region={region}/f.parquet", size=1, partition_values={"region": region}, stats=stats)


def _hint(op: str, value: str, column: str = "region") -> str:
    return json.dumps({"op": op, "children": [{"op": "column", "name": column, "valueType": "string"},
                                              {"op": "literal", "value": value, "valueType": "string"}]})  # fmt: skip


def test_json_predicate_pruning_is_three_valued_and_best_effort() -> None:
    files = [_entry("eu"), _entry("us"), _entry(None)]
    assert [f.partition_values["region"] for f in prune_by_json_predicate(files, _hint("equal", "eu"), ["region"])] == [
        "eu",
        None,
    ]
    assert len(prune_by_json_predicate(files, _hint("equal", "eu", column="name"), ["region"])) == 3  # data column
    negated = json.dumps({"op": "not", "children": [json.loads(_hint("equal", "eu"))]})
    assert [f.partition_values["region"] for f in prune_by_json_predicate(files, negated, ["region"])] == ["us", None]
    assert len(prune_by_json_predicate(files, '{"op":"equal","children":[]}', ["region"])) == 3  # malformed


def test_json_predicate_values_of_different_types_decide_nothing() -> None:
    """A literal without a valueType is a string: against a date column it cannot say "false"
    (spec: on any error in predicate processing, skip filtering)."""
    files = [_entry("2022-01-01"), _entry("2022-01-02")]

    def on_date(literal: dict[str, str]) -> str:
        return json.dumps(
            {"op": "equal", "children": [{"op": "column", "name": "region", "valueType": "date"}, literal]}
        )

    assert prune_by_json_predicate(files, on_date({"op": "literal", "value": "2022-01-01"}), ["region"]) == files
    typed = on_date({"op": "literal", "value": "2022-01-01", "valueType": "DATE"})  # types are case-insensitive
    assert prune_by_json_predicate(files, typed, ["region"]) == files[:1]


def test_limit_hint_counts_only_known_rows() -> None:
    files = [_entry("eu", 2), _entry("us"), _entry("eu", 5), _entry("us", 1)]
    assert apply_limit_hint(files, 6) == files[:3]
    assert apply_limit_hint(files, 2) == files[:1]
    assert apply_limit_hint(files, None) == files


def test_limit_hint_counts_the_rows_deletion_vectors_leave() -> None:
    dv = DeletionVector("u", "ab" + "0" * 20, 34, 9)  # 9 of the file's 10 rows deleted
    files = [dataclasses.replace(_entry("eu", 10), deletion_vector=dv), _entry("us", 5)]
    assert apply_limit_hint(files, 5) == files


def test_signatures_and_tokens() -> None:
    signer = Signer(b"k" * 32)
    sig = signer.sign_file("a/b", 1000)
    signer.check_file("a/b", "1000", sig, now_ms=999)
    with pytest.raises(SignatureError) as late:
        signer.check_file("a/b", "1000", sig, now_ms=1000)
    assert late.value.expired
    with pytest.raises(SignatureError):
        Signer(b"other" * 8).check_file("a/b", "1000", sig, now_ms=0)
    token = signer.encode_token("page", {"i": 3}, expires_ms=50)
    assert signer.decode_token("page", token, now_ms=10)["i"] == 3
    for kind, now in (("refresh", 10), ("page", 51)):
        with pytest.raises(SignatureError):
            signer.decode_token(kind, token, now_ms=now)


def test_samples_are_deterministic_and_cover_every_type_with_nulls(tmp_path: Path) -> None:
    one, two = sample_rows(random.Random(9), list(range(200))), sample_rows(random.Random(9), list(range(200)))
    assert one.equals(two) and one.schema == SAMPLE_SCHEMA
    assert all(one.column(name).null_count > 0 for name in SAMPLE_SCHEMA.names if name != "id")
    a = create_sample_table(tmp_path / "a", seed=1)
    b = create_sample_table(tmp_path / "b", seed=1)
    kinds = apply_random_commits(a, random.Random(2), 12)
    assert kinds == apply_random_commits(b, random.Random(2), 12)
    assert {"append", "update", "delete", "merge", "drop_partition"} <= set(kinds)

    def content(path: Path) -> pa.Table:
        return DeltaTable(str(path)).to_pyarrow_table().sort_by("id")

    assert content(a).equals(content(b)) and DeltaTable(str(a)).version() == 12


def test_a_table_recreated_at_the_same_path_is_read_afresh(tmp_path: Path) -> None:
    """Dropping a table and creating another one in its place reuses version numbers; cached
    snapshots of the old table must not answer for the new one (they name files that are gone)."""
    import shutil

    path = create_sample_table(tmp_path / "t", rows=10, seed=1)
    apply_random_commits(path, random.Random(1), 3)
    log = DeltaLog(path)
    for version in range(4):
        log.snapshot(version)  # fill the caches
    old_id = log.snapshot(2).metadata.id

    shutil.rmtree(path)
    create_sample_table(path, rows=6, seed=2)
    apply_random_commits(path, random.Random(2), 2)

    snap = log.snapshot(2)
    assert snap.metadata.id != old_id
    assert _names(snap.files) == {Path(u).name for u in DeltaTable(str(path), version=2).file_uris()}
    assert log.files_exist(snap.files)
    assert _names(log.snapshot().files) == _names(snap.files)
