"""Column mapping: Sail's ``name``-mode files renamed to logical names equal what Sail reads.

``id`` mode is hand-built (Sail writes only ``name`` mode): a schema plus a parquet file whose
field ids, not names, tie its columns to the schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.column_mapping import ColumnMapping, column_mapping_mode


def _mapping(table: Any) -> ColumnMapping:
    metadata = table.metadata()
    features = frozenset(table.protocol().get("readerFeatures") or ())
    return ColumnMapping.from_schema(metadata["schemaString"], column_mapping_mode(metadata["configuration"], features))


def test_sail_writes_physical_names(cm_table: Any) -> None:
    mapping = _mapping(cm_table)
    assert mapping.mode == "name"
    assert sorted(mapping.logical_names.values()) == ["id", "my col", "part", "st"]
    assert all(p.startswith("col-") for p in mapping.logical_names)
    add = cm_table.adds(0)[0]
    file_schema = pq.read_schema(cm_table.path / add["path"])
    assert not {"id", "my col", "st"} & set(file_schema.names)
    assert sorted(mapping.file_columns(file_schema).values()) == ["id", "my col", "st"]


def test_renamed_files_equal_what_sail_reads(spark: Any, cm_table: Any) -> None:
    mapping = _mapping(cm_table)
    rows: list[dict[str, Any]] = []
    for version in (0, 1):
        for add in cm_table.adds(version):
            data = mapping.to_logical(pq.ParquetFile(cm_table.path / add["path"]).read())
            partition = mapping.partition_values(add["partitionValues"])
            assert set(partition) == {"part"}
            for row in data.to_pylist():
                rows.append({**row, "part": int(partition["part"])})
    sail = [r.asDict(recursive=True) for r in spark.read.format("delta").load(str(cm_table.path)).collect()]
    assert sorted(rows, key=lambda r: r["id"]) == sorted(sail, key=lambda r: r["id"])
    assert len(rows) == 16


def test_record_batches_are_renamed_too(cm_table: Any) -> None:
    mapping = _mapping(cm_table)
    add = cm_table.adds(0)[0]
    batch = next(pq.ParquetFile(cm_table.path / add["path"]).iter_batches())
    renamed = mapping.to_logical(batch)
    assert isinstance(renamed, pa.RecordBatch)
    assert renamed.schema.names == ["id", "my col", "st"]
    assert [f.name for f in renamed.schema.field("st").type] == ["a", "b"]


def test_change_type_column_passes_through(cm_table: Any) -> None:
    mapping = _mapping(cm_table)
    add = cm_table.adds(0)[0]
    data = pq.ParquetFile(cm_table.path / add["path"]).read()
    cdc = data.append_column("_change_type", pa.array(["insert"] * data.num_rows))
    assert mapping.to_logical(cdc).schema.names == ["id", "my col", "st", "_change_type"]
    assert mapping.file_columns(cdc.schema)["_change_type"] == "_change_type"


def test_stats_translate_to_logical_names(cm_table: Any) -> None:
    mapping = _mapping(cm_table)
    for add in cm_table.adds(0) + cm_table.adds(1):
        physical = json.loads(add["stats"])
        logical = mapping.stats(physical)
        assert logical["numRecords"] == physical["numRecords"]
        for key in ("minValues", "maxValues", "nullCount"):
            assert set(logical[key]) == {"id", "my col", "st"}
            assert set(logical[key]["st"]) == {"a", "b"}
        ids = pq.ParquetFile(cm_table.path / add["path"]).read().column(0).to_pylist()
        assert (logical["minValues"]["id"], logical["maxValues"]["id"]) == (min(ids), max(ids))
        assert logical["minValues"]["st"]["a"] == 10 * min(ids)


def test_stats_of_unknown_columns_are_dropped(cm_table: Any) -> None:
    mapping = _mapping(cm_table)
    stats = mapping.stats({"numRecords": 1, "minValues": {"col-dropped": 5}, "nullCount": {"col-dropped": 0}})
    assert stats == {"numRecords": 1, "minValues": {}, "nullCount": {}}


def test_unknown_partition_column_is_an_error(cm_table: Any) -> None:
    with pytest.raises(ProtocolViolation, match="col-nope"):
        _mapping(cm_table).partition_values({"col-nope": "1"})


# --- id mode (hand-built: Sail writes name mode only) -----------------------------------


def _field(name: str, type_: object, field_id: int, physical: str) -> dict[str, Any]:
    metadata = {"delta.columnMapping.id": field_id, "delta.columnMapping.physicalName": physical}
    return {"name": name, "type": type_, "nullable": True, "metadata": metadata}


ID_SCHEMA = {
    "type": "struct",
    "fields": [
        _field("key", "long", 1, "col-k"),
        _field(
            "items",
            {
                "type": "array",
                "elementType": {"type": "struct", "fields": [_field("qty", "integer", 3, "col-q")]},
                "containsNull": True,
            },
            2,
            "col-i",
        ),
        _field("renamed later", "string", 4, "col-s"),
    ],
}


def _with_id(name: str, type_: pa.DataType, field_id: int) -> pa.Field:
    return pa.field(name, type_, metadata={b"PARQUET:field_id": str(field_id).encode()})


def test_id_mode_matches_by_parquet_field_id(tmp_path: Path) -> None:
    """File names differ from the schema's physical names: only the field ids tie them together."""
    item = pa.struct([_with_id("whatever", pa.int32(), 3)])
    schema = pa.schema(
        [
            _with_id("x1", pa.int64(), 1),
            _with_id("x2", pa.list_(pa.field("element", item)), 2),
            _with_id("x3", pa.string(), 4),
            _with_id("gone", pa.string(), 99),  # a dropped column's id: not in the schema any more
        ]
    )
    data = pa.table([[1, 2], [[{"whatever": 5}], None], ["a", "b"], ["z", "z"]], schema=schema)
    pq.write_table(data, tmp_path / "f.parquet")
    read = pq.ParquetFile(tmp_path / "f.parquet").read()
    assert read.schema.field("x1").metadata[b"PARQUET:field_id"] == b"1"

    mapping = ColumnMapping.from_schema(json.dumps(ID_SCHEMA), "id")
    assert mapping.file_columns(read.schema) == {"x1": "key", "x2": "items", "x3": "renamed later"}
    logical = mapping.to_logical(read)
    assert logical.to_pylist() == [
        {"key": 1, "items": [{"qty": 5}], "renamed later": "a"},
        {"key": 2, "items": None, "renamed later": "b"},
    ]
    assert mapping.stats({"minValues": {"col-k": 1, "col-s": "a"}})["minValues"] == {"key": 1, "renamed later": "a"}


def test_id_mode_refuses_files_without_field_ids() -> None:
    mapping = ColumnMapping.from_schema(ID_SCHEMA, "id")
    with pytest.raises(ProtocolViolation, match="no parquet field ids"):
        mapping.to_logical(pa.table({"col-k": [1]}))


def test_id_mode_needs_ids_in_the_schema() -> None:
    schema = {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]}
    with pytest.raises(ProtocolViolation, match="column a has no delta.columnMapping.physicalName"):
        ColumnMapping.from_schema(schema, "id")


def test_none_mode_is_the_identity() -> None:
    schema = {"type": "struct", "fields": [{"name": "a", "type": "long", "nullable": True, "metadata": {}}]}
    mapping = ColumnMapping.from_schema(schema, "none")
    table = pa.table({"a": [1]})
    assert mapping.to_logical(table) is table
    assert mapping.partition_values({"a": "1"}) == {"a": "1"}
    assert mapping.stats({"minValues": {"a": 1}}) == {"minValues": {"a": 1}}


def test_mode_is_honoured_only_with_the_feature() -> None:
    config = {"delta.columnMapping.mode": "name"}
    assert column_mapping_mode(config, frozenset({"columnMapping"})) == "name"
    assert column_mapping_mode(config, frozenset()) == "none"
    assert column_mapping_mode({}, frozenset({"columnMapping"})) == "none"
    with pytest.raises(ProtocolViolation, match="'bogus'"):
        column_mapping_mode({"delta.columnMapping.mode": "bogus"}, frozenset({"columnMapping"}))


def test_schema_that_is_not_a_struct() -> None:
    with pytest.raises(ProtocolViolation, match="not a Delta struct"):
        ColumnMapping.from_schema('"long"', "name")
