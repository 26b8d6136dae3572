"""A bootstrap's provider files read by the engine as downloaded (sharesync.sync.staging.direct).

The provider tables are written by deltalake and served by the local server. Staged with
``direct=True`` and read by the engine, a snapshot must be row for row, column for column and
type for type (nullability included: it becomes the target's schema) what the usual staging
gives: partition values (NULL included) and the change columns added, a NOT NULL key and
``string_view`` columns read as staging types them, files that do not fit (written before a
column was added) staged the usual way in the same batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from support.faults import SharingServer

from sharesync.pipelines.jobs.staged import count_rows, read_staged, staged_files
from sharesync.sync.core.location import locate
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.wire import StructType
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.direct import casts_for, read_manifest
from sharesync.sync.staging.files import StageLayout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHARE, SCHEMA = "direct", "s"


def _rows(ids: range, *, with_note: bool = False) -> pa.Table:
    columns: dict[str, Any] = {
        "id": pa.array(list(ids), pa.int64()),
        "region": pa.array([("eu", "us", None)[i % 3] for i in ids], pa.string()),
        "bucket": pa.array([i % 2 for i in ids], pa.int32()),
        "name": pa.array([f"n{i}" if i % 5 else None for i in ids], pa.string()),
        "amount": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
        "day": pa.array([date(2024, 1, 1 + i % 28) for i in ids], pa.date32()),
        "at": pa.array([datetime(2024, 1, 1, i % 24, tzinfo=UTC) for i in ids], pa.timestamp("us", tz="UTC")),
    }
    if with_note:
        columns["note"] = pa.array([f"note {i}" for i in ids], pa.string())
    return pa.table(columns)


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("direct-provider")
    plain = str(root / SHARE / SCHEMA / "plain")
    write_deltalake(plain, _rows(range(0, 30)), partition_by=["region", "bucket"])
    write_deltalake(plain, _rows(range(30, 50)), partition_by=["region", "bucket"], mode="append")
    evolved = str(root / SHARE / SCHEMA / "evolved")
    write_deltalake(evolved, _rows(range(0, 20)), partition_by=["region"])
    # A column added later: the first commit's files lack it, so they cannot be read as they are.
    write_deltalake(evolved, _rows(range(20, 40), with_note=True), partition_by=["region"], mode="append",
                    schema_mode="merge")  # fmt: skip
    # A NOT NULL key; deltalake's UPDATE rewrites files with string views, its first write did not.
    strict = str(root / SHARE / SCHEMA / "strict")
    first = _rows(range(0, 30))
    write_deltalake(strict, first.cast(first.schema.set(0, pa.field("id", pa.int64(), nullable=False))),
                    partition_by=["bucket"])  # fmt: skip
    DeltaTable(strict).update(predicate="id < 10", updates={"name": "'renamed'"})
    more = _rows(range(30, 40))
    write_deltalake(strict, more.cast(more.schema.set(0, pa.field("id", pa.int64(), nullable=False))),
                    partition_by=["bucket"], mode="append")  # fmt: skip
    return root


@pytest.fixture(scope="module")
def client(provider: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharingClient]:
    with SharingServer(provider) as server:
        profile = server.write_profile(tmp_path_factory.mktemp("direct-profile") / "p.share")
        yield SharingClient(load_profile(profile))


def _stage(client: SharingClient, table: str, directory: Path, *, direct: bool) -> batches.StagedBatch:
    result = client.query(f"{SHARE}.{SCHEMA}.{table}")
    layout = StageLayout.build(result.metadata.table_schema, result.metadata.partition_columns)
    files = batches.snapshot_change_files(result)
    return batches.stage(client, result, files, layout, directory, concurrency=4, snapshot=True, direct=direct)


def _engine_rows(spark: SparkSession, staged: Path) -> list[tuple[Any, ...]]:
    df = read_staged(spark, staged)
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize("table", ["plain", "evolved", "strict"])
def test_the_engine_reads_a_direct_snapshot_as_the_usual_staging_gives_it(
    spark: SparkSession, client: SharingClient, tmp_path: Path, table: str
) -> None:
    usual = _stage(client, table, tmp_path / "usual", direct=False)
    kept = _stage(client, table, tmp_path / "kept", direct=True)

    manifest = read_manifest(kept.path)
    assert manifest is not None and manifest.groups
    assert read_manifest(usual.path) is None
    groups = {tuple(sorted(g.files)) for g in manifest.groups}
    assert len(groups) == len(manifest.groups)
    kept_files = manifest.file_names
    staged = {f.name for f in staged_files(kept.path)}
    assert kept_files <= staged
    if table == "evolved":  # the files from before the column was added are re-encoded
        assert staged - kept_files
    else:
        assert staged == kept_files
    assert kept.rows == usual.rows == count_rows(staged_files(kept.path))

    if table == "strict":  # each partition's files in two groups: the written and the rewritten ones
        views = {"region": "string", "name": "string"}
        assert sorted((g.casts for g in manifest.groups), key=len) == [{}, {}, views, views]
    expected = _engine_rows(spark, usual.path)
    assert len(expected) == usual.rows
    assert read_staged(spark, kept.path).schema == read_staged(spark, usual.path).schema
    assert _engine_rows(spark, kept.path) == expected


def test_a_manifest_whose_files_are_gone_is_an_error(
    spark: SparkSession, client: SharingClient, tmp_path: Path
) -> None:
    kept = _stage(client, "plain", tmp_path / "kept", direct=True)
    manifest = read_manifest(kept.path)
    assert manifest is not None
    lost = sorted(manifest.file_names)[0]
    locate(kept.path).join(lost).delete()
    from sharesync.sync.core.errors import SyncError

    with pytest.raises(SyncError, match="lacks files its manifest lists; stage the batch again"):
        read_staged(spark, kept.path)


SCHEMA_JSON = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "region", "type": "string", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def _layout() -> StageLayout:
    return StageLayout.build(StructType.model_validate(SCHEMA_JSON), ["region"])


@pytest.mark.parametrize(
    ("file_schema", "casts"),
    [
        (pa.schema([("id", pa.int64()), ("name", pa.string())]), {}),
        (pa.schema([("name", pa.string()), ("extra", pa.int8()), pa.field("id", pa.int64(), nullable=False)]), {}),
        (pa.schema([("id", pa.int64()), ("name", pa.large_string())]), {"name": "string"}),
        (pa.schema([("id", pa.int64()), ("name", pa.string_view())]), {"name": "string"}),
        (pa.schema([("id", pa.int64())]), None),  # written before "name" was added
        (pa.schema([("id", pa.int32()), ("name", pa.string())]), None),  # before a type was widened
        (pa.schema([("ID", pa.int64()), ("name", pa.string())]), None),  # another spelling
        (pa.schema([("id", pa.timestamp("ns")), ("name", pa.string())]), None),
        (pa.schema([("id", pa.int64()), ("name", pa.binary())]), None),
    ],
)
def test_a_file_is_read_as_downloaded_only_when_its_columns_are_the_layouts(
    file_schema: pa.Schema, casts: dict[str, str] | None
) -> None:
    assert casts_for(file_schema, _layout()) == casts


def test_files_with_column_mapping_are_always_re_encoded() -> None:
    # Even when each physical name is the logical one, the file's columns are the mapping's to name.
    fields = [
        {**f, "metadata": {"delta.columnMapping.physicalName": f["name"], "delta.columnMapping.id": i}}
        for i, f in enumerate(SCHEMA_JSON["fields"], start=1)  # type: ignore[arg-type]
    ]
    schema = StructType.model_validate({"type": "struct", "fields": fields, "column_mapping_mode": "name"})
    file_schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    assert casts_for(file_schema, _layout()) == {}
    assert casts_for(file_schema, StageLayout.build(schema, ["region"])) is None


def test_files_whose_unselected_columns_differ_in_type_are_read_apart(spark: SparkSession, tmp_path: Path) -> None:
    """A ``columns:`` projection reads only ``id``; the engine still merges the whole schemas of
    the files it reads together, so files typed apart outside the projection are grouped apart."""
    from sharesync.sync.protocol.changes import snapshot_files
    from sharesync.sync.protocol.wire import File
    from sharesync.sync.staging.direct import DirectFiles

    wide = {
        **SCHEMA_JSON,
        "fields": [*SCHEMA_JSON["fields"], {"name": "w", "type": "long", "nullable": True, "metadata": {}}],
    }  # type: ignore[list-item]
    layout = StageLayout.build(StructType.model_validate(wide), ["region"], keep=["id"])
    data = locate(tmp_path / "batch").make_empty()
    kept = DirectFiles(data, layout)
    spellings = [pa.int32(), pa.int64(), pa.int64()]
    names = [pa.string(), pa.string(), pa.large_string()]
    for i, (w, name) in enumerate(zip(spellings, names, strict=True)):
        downloaded = tmp_path / f"download-{i}.parquet"
        columns = {"id": pa.array([i], pa.int64()), "name": pa.array([f"n{i}"], name), "w": pa.array([i], w)}
        pq.write_table(pa.table(columns), downloaded)
        action = File(url="https://provider.invalid/f", id=f"f{i}", partition_values={"region": "eu"}, size=1)
        [change] = snapshot_files([action], 7)
        assert kept.take(downloaded, f"part-{i}.parquet", change) == 1
    kept.finish()

    manifest = read_manifest(data)
    assert manifest is not None and len(manifest.groups) == 3
    rows = read_staged(spark, data).collect()
    assert sorted((r["id"], r["_commit_version"]) for r in rows) == [(0, 7), (1, 7), (2, 7)]


def _snapshot_change(index: int) -> Any:
    from sharesync.sync.protocol.changes import snapshot_files
    from sharesync.sync.protocol.wire import File

    action = File(url="https://provider.invalid/f", id=f"f{index}", partition_values={"region": "eu"}, size=1)
    [change] = snapshot_files([action], 7)
    return change


def test_a_file_with_two_columns_alike_but_for_case_stages_the_exact_spelling_or_says_it_is_ambiguous(
    tmp_path: Path,
) -> None:
    """A provider file may hold a column the table does not know whose name differs from a table
    column's only in case; staging reads the exact spelling, never the other one's values."""
    from sharesync.sync.core.errors import DownloadError
    from sharesync.sync.staging.files import load_file

    downloaded = tmp_path / "both.parquet"
    both = {"id": [0, 1, 2], "ID": [100, 101, 102], "name": ["a", "b", "c"]}
    pq.write_table(pa.table(both), downloaded)
    assert casts_for(pq.read_schema(downloaded), _layout()) is None  # the engine could not tell them apart

    staged = load_file(downloaded, _snapshot_change(0), _layout())
    assert staged.column("id").to_pylist() == [0, 1, 2]
    assert staged.column("region").to_pylist() == ["eu"] * 3

    fields = [{**f, "name": "Id"} if f["name"] == "id" else f for f in SCHEMA_JSON["fields"]]  # type: ignore[attr-defined]
    neither = StageLayout.build(StructType.model_validate({**SCHEMA_JSON, "fields": fields}), ["region"])
    with pytest.raises(DownloadError, match=r"columns 'ID', 'id', which all match the table's column 'Id'"):
        load_file(downloaded, _snapshot_change(0), neither)


def test_files_whose_nested_fields_differ_in_metadata_are_read_apart(spark: SparkSession, tmp_path: Path) -> None:
    """Sail refuses to read together files whose nested fields carry different metadata
    ("conflicting metadata"), as field ids of different writers do: such files are grouped apart."""
    from sharesync.sync.staging.direct import DirectFiles

    nested = {
        **SCHEMA_JSON,
        "fields": [
            *SCHEMA_JSON["fields"],  # type: ignore[misc]
            {"name": "st", "type": {"type": "struct", "fields": [
                {"name": "a", "type": "long", "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}},
        ],
    }  # fmt: skip
    layout = StageLayout.build(StructType.model_validate(nested), ["region"])
    data = locate(tmp_path / "batch").make_empty()
    kept = DirectFiles(data, layout)
    for i, field_id in enumerate(["10", "20", "10"]):
        child = pa.field("a", pa.int64(), metadata={b"PARQUET:field_id": field_id.encode()})
        columns = {
            "id": pa.array([i], pa.int64()),
            "name": pa.array([f"n{i}"], pa.string()),
            "st": pa.array([{"a": i}], pa.struct([child])),
        }
        downloaded = tmp_path / f"download-{i}.parquet"
        pq.write_table(pa.table(columns), downloaded)
        assert kept.take(downloaded, f"part-{i}.parquet", _snapshot_change(i)) == 1
    kept.finish()

    manifest = read_manifest(data)
    assert manifest is not None and sorted(len(g.files) for g in manifest.groups) == [1, 2]
    rows = read_staged(spark, data).collect()
    assert sorted((r["id"], r["st"]["a"], r["region"]) for r in rows) == [(0, 0, "eu"), (1, 1, "eu"), (2, 2, "eu")]


@pytest.mark.parametrize(
    ("footer", "kept"),
    [
        ({}, True),
        ({b"org.apache.spark.version": b"3.5.1"}, True),
        ({b"org.apache.spark.version": b"2.4.8"}, False),  # Spark 2: the hybrid Julian calendar
        ({b"org.apache.spark.version": b"3.5.1", b"org.apache.spark.legacyDateTime": b""}, False),
        ({b"org.apache.spark.version": b"3.5.1", b"org.apache.spark.legacyINT96": b""}, False),
    ],
)
def test_files_in_sparks_legacy_calendar_are_staged_not_kept(
    footer: dict[bytes, bytes], kept: bool, tmp_path: Path
) -> None:
    """Apache Spark may shift such files' pre-1582 dates when it reads them; staging reads what is stored."""
    from sharesync.sync.staging.direct import DirectFiles

    downloaded = tmp_path / "spark.parquet"
    table = pa.table({"id": [1], "name": ["a"], "day": [date(1500, 3, 1)]})
    pq.write_table(table.replace_schema_metadata(footer), downloaded)
    files = DirectFiles(locate(tmp_path / "batch").make_empty(), _layout())
    assert (files.take(downloaded, "part-0.parquet", _snapshot_change(0)) is not None) is kept


@pytest.mark.parametrize(("values", "kept"), [([1.5, 2.0], True), ([float("nan"), 2.0], False), ([2.0, 2.0], False)])
def test_files_whose_float_statistics_look_constant_are_staged_not_kept(
    values: list[float], kept: bool, tmp_path: Path
) -> None:
    """The engine reads such a column as its min (tests/pipelines/test_spark.py): a NaN beside
    equal values — writers leave NaN out of min and max — would come back as that value."""
    from sharesync.sync.staging.direct import DirectFiles

    fields = [*SCHEMA_JSON["fields"], {"name": "x", "type": "double", "nullable": True, "metadata": {}}]
    layout = StageLayout.build(StructType.model_validate({**SCHEMA_JSON, "fields": fields}), ["region"])
    downloaded = tmp_path / "provider.parquet"
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"], "x": values}), downloaded)
    files = DirectFiles(locate(tmp_path / "batch").make_empty(), layout)
    assert (files.take(downloaded, "part-0.parquet", _snapshot_change(0)) is not None) is kept
