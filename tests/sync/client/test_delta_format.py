"""Delta-format answers (spec "API Response Actions in Delta Format") read into the client's one model.

The spec's own examples are parsed as they stand; whole answers go through httpx, the page
grammar and the stream exactly like parquet ones (``httpx.MockTransport`` is the transport seam).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sharesync.sync.core.errors import ProtocolViolation, UnsupportedTableFeature
from sharesync.sync.protocol.deltaformat import parse_delta_action
from sharesync.sync.protocol.wire import AddFile, CdfFile, File, Metadata, Protocol, RemoveFile

from .conftest import ASKED, SCHEMA, end, ndjson
from .test_streams import Make, recorder

TABLE = "s.sc.t"
DELTA = {"delta-sharing-capabilities": "responseformat=delta;includeendstreamaction=true"}

# ---------------------------------------------------------------- the spec's examples, verbatim

SPEC_PROTOCOL = """{
  "protocol": {
    "version": 5,
    "deltaProtocol": {
      "minReaderVersion": 3,
      "minWriterVersion": 7,
      "readerFeatures": ["columnMapping"],
      "writerFeatures": ["columnMapping", "identityColumns"]
    }
  }
}"""

SPEC_METADATA = """{
  "metaData": {
    "version": 20,
    "size": 123456,
    "numFiles": 5,
    "location": "s3://delta-share-demo/tables/table1",
    "auxiliaryLocations": [
       "s3://delta-share-demo/tables/table1-aux1"
    ],
    "accessModes": ["url", "dir"],
    "deltaMetadata": {
      "partitionColumns": [
        "date"
      ],
      "format": {
        "provider": "parquet"
      },
      "schemaString": "{\\"type\\":\\"struct\\",\\"fields\\":[{\\"name\\":\\"eventTime\\",\\"type\\":\\"timestamp\\",\\"nullable\\":true,\\"metadata\\":{}},{\\"name\\":\\"date\\",\\"type\\":\\"date\\",\\"nullable\\":true,\\"metadata\\":{}}]}",
      "id": "f8d5c169-3d01-4ca3-ad9e-7dc3355aedb2",
      "configuration": {
        "enableChangeDataFeed": "true"
      }
    }
  }
}"""

SPEC_FILE = """{
  "file": {
    "id": "591723a8-6a27-4240-a90e-57426f4736d2",
    "size": 573,
    "expirationTimestamp": 1652140800000,
    "deltaSingleAction": {
      "add": {
        "path": "https://<s3-bucket-name>.s3.us-west-2.amazonaws.com/delta-exchange-test/table2/date%3D2021-04-28/part-00000-591723a8-6a27-4240-a90e-57426f4736d2.c000.snappy.parquet?...",
        "partitionValues": {
          "date": "2021-04-28"
        },
        "stats": "{\\"numRecords\\":1,\\"minValues\\":{\\"eventTime\\":\\"2021-04-28T23:33:48.719Z\\"},\\"maxValues\\":{\\"eventTime\\":\\"2021-04-28T23:33:48.719Z\\"},\\"nullCount\\":{\\"eventTime\\":0}}"
      }
    }
  }
}"""


def one_line(text: str) -> str:
    return json.dumps(json.loads(text))


def test_the_spec_protocol_example() -> None:
    action = parse_delta_action(one_line(SPEC_PROTOCOL), changes=False)
    assert action == Protocol(
        min_reader_version=3,
        min_writer_version=7,
        reader_features=("columnMapping",),
        writer_features=("columnMapping", "identityColumns"),
        version=5,
    )


def test_the_spec_metadata_example() -> None:
    action = parse_delta_action(one_line(SPEC_METADATA), changes=False)
    assert isinstance(action, Metadata)
    assert (action.id, action.version, action.size, action.num_files) == (
        "f8d5c169-3d01-4ca3-ad9e-7dc3355aedb2",
        20,
        123456,
        5,
    )
    assert action.partition_columns == ["date"] and action.cdf_enabled
    assert action.table_schema.names == ["eventTime", "date"] and action.column_mapping_mode == "none"


def test_the_spec_file_example_is_a_snapshot_file() -> None:
    action = parse_delta_action(one_line(SPEC_FILE), changes=False)
    assert isinstance(action, File)
    assert (action.id, action.size, action.expiration_timestamp) == (
        "591723a8-6a27-4240-a90e-57426f4736d2",
        573,
        1652140800000,
    )
    assert action.url.startswith("https://<s3-bucket-name>.s3.us-west-2.amazonaws.com/") and action.url.endswith("?...")
    assert action.partition_values == {"date": "2021-04-28"}
    assert action.parsed_stats is not None and action.parsed_stats.num_records == 1
    assert action.deletion_vector is None and action.data_change


def test_the_spec_file_example_in_a_change_feed_needs_its_version() -> None:
    # A change-feed add carries version and timestamp; the spec's example (a snapshot line) has none.
    with pytest.raises(
        ProtocolViolation, match=r"invalid 'file' action: timestamp: Field required; version: Field required"
    ):
        parse_delta_action(one_line(SPEC_FILE), changes=True)


# ---------------------------------------------------------------- building blocks of answers

DV = {"storageType": "p", "pathOrInlineDv": "https://bucket.example.com/dv.bin?sig=secret", "offset": 1,
      "sizeInBytes": 34, "cardinality": 1}  # fmt: skip
CM_SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": True,
     "metadata": {"delta.columnMapping.physicalName": "col-a", "delta.columnMapping.id": 1}},
    {"name": "region", "type": "string", "nullable": True,
     "metadata": {"delta.columnMapping.physicalName": "col-b", "delta.columnMapping.id": 2}}]})  # fmt: skip


def d_protocol(reader: int = 3, features: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    inner = {"minReaderVersion": reader, "minWriterVersion": 7, "readerFeatures": features or ["deletionVectors"]}
    return {"protocol": {"deltaProtocol": inner, **extra}}


def d_metadata(schema: str = SCHEMA, configuration: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    inner = {"id": "table-id", "format": {"provider": "parquet", "options": {}}, "schemaString": schema,
             "partitionColumns": [], "configuration": configuration or {}, "createdTime": 1}  # fmt: skip
    return {"metaData": {"deltaMetadata": inner, **extra}}


def d_file(file_id: str, kind: str = "add", *, dv: dict[str, Any] | None = None, **wrapper: Any) -> dict[str, Any]:
    action: dict[str, Any] = {"path": f"https://bucket.example.com/{file_id}.parquet?sig=secret",
                              "partitionValues": {}, "size": 100, "dataChange": True}  # fmt: skip
    if dv is not None:
        action["deletionVector"] = dv
    if kind == "add":
        action["stats"] = json.dumps({"numRecords": 10, "tightBounds": dv is None})
    for key in ("path", "size", "dataChange"):
        if key in wrapper:
            action[key] = wrapper.pop(key)
    return {"file": {"id": file_id, "expirationTimestamp": 2_000_000_000_000, **wrapper,
                     "deltaSingleAction": {kind: action}}}  # fmt: skip


def delta_answer(lines: list[dict[str, Any]], version: int = 5) -> Any:
    return ndjson(lines, version=version, echo=False, headers=DELTA)


# ---------------------------------------------------------------- whole answers


def test_a_delta_snapshot_reads_into_the_same_model(make_client: Make) -> None:
    seen, handler = recorder(delta_answer([
        d_protocol(), d_metadata(configuration={"delta.enableDeletionVectors": "true"}, version=5, size=200, numFiles=2),
        d_file("a"), d_file("b", dv=DV, deletionVectorFileId="dv-1"), end(minUrlExpirationTimestamp=1_900_000_000_000)]))  # fmt: skip
    result = make_client(handler).query(TABLE)
    assert seen[0].headers["delta-sharing-capabilities"] == ASKED
    assert result.response_format == "delta" and result.version == 5
    assert result.protocol.reader_features == ("deletionVectors",) and result.metadata.num_files == 2
    assert [type(f) for f in result.files] == [File, File] and [f.id for f in result.files] == ["a", "b"]
    a, b = result.files
    assert a.deletion_vector is None and a.url == "https://bucket.example.com/a.parquet?sig=secret"
    assert b.deletion_vector is not None and b.deletion_vector_file_id == "dv-1"
    assert (b.deletion_vector.storage_type, b.deletion_vector.offset, b.deletion_vector.cardinality) == ("p", 1, 1)
    assert "secret" not in repr(b)  # a presigned URL (data or DV) never shows in a repr


def test_a_delta_change_feed_keeps_its_kinds_and_historical_protocols(make_client: Make) -> None:
    seen, handler = recorder(delta_answer([
        d_protocol(features=["deletionVectors", "columnMapping"]), d_metadata(CM_SCHEMA, {"delta.columnMapping.mode": "name"}),
        d_file("a", version=1, timestamp=10),
        d_protocol(features=["deletionVectors", "columnMapping"], version=2),
        d_file("a", "remove", version=2, timestamp=20), d_file("a", dv=DV, version=2, timestamp=20),
        d_file("c", "cdc", version=3, timestamp=30), end()], version=1))  # fmt: skip
    result = make_client(handler).changes(TABLE, starting_version=1, include_historical_metadata=True)
    assert [type(f) for f in result.files] == [AddFile, RemoveFile, AddFile, CdfFile]
    assert [(f.id, f.version, f.timestamp) for f in result.files] == [
        ("a", 1, 10),
        ("a", 2, 20),
        ("a", 2, 20),
        ("c", 3, 30),
    ]
    assert [p.version for p in result.historical_protocols] == [2]
    assert result.metadata.table_schema.column_mapping.logical_names == {"col-a": "id", "col-b": "region"}
    assert seen[0].url.params["includeHistoricalProtocol"] == "true"


def test_a_query_with_starting_version_reads_delta_adds_as_changes(make_client: Make) -> None:
    lines = [d_protocol(), d_metadata(), d_file("a", version=3, timestamp=1), end()]
    _seen, handler = recorder(delta_answer(lines, version=3))
    result = make_client(handler).query(TABLE, starting_version=3)
    assert [type(f) for f in result.files] == [AddFile]


def test_a_server_may_still_answer_in_parquet(make_client: Make) -> None:
    lines = [{"protocol": {"minReaderVersion": 1}}, {"metaData": {"id": "t", "format": {"provider": "parquet"},
             "schemaString": SCHEMA, "partitionColumns": []}}, end()]  # fmt: skip
    _seen, handler = recorder(ndjson(lines))
    assert make_client(handler).metadata(TABLE).protocol == Protocol(min_reader_version=1)


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        ([d_protocol(features=["deletionVectors", "variantType"]), d_metadata(), end()],
         r"table s\.sc\.t uses Delta reader feature\(s\) variantType, which sharesync cannot read"),
        ([d_protocol(reader=4), d_metadata(), end()], "reader version 4"),
        # includeHistoricalProtocol: a feature turned on inside the range stops the batch at its line.
        ([d_protocol(), d_metadata(), d_file("a", version=1, timestamp=1),
          d_protocol(features=["deletionVectors", "variantType"], version=2), end()], r"variantType.*\(from version 2\)"),
    ],
)  # fmt: skip
def test_a_reader_feature_sharesync_lacks_is_named(make_client: Make, lines: list[dict[str, Any]], match: str) -> None:
    seen, handler = recorder(delta_answer(lines))
    with pytest.raises(UnsupportedTableFeature, match=match):
        make_client(handler).changes(TABLE, starting_version=1)
    assert len(seen) == 1  # permanent: not retried


@pytest.mark.parametrize(
    ("line", "match"),
    [
        (d_file("a", "remove"), "a snapshot lists the table's files as add actions, got a remove action"),
        ({"file": {"id": "a", "deltaSingleAction": {"add": {}, "remove": {}}}}, "must hold one add, remove or cdc"),
        ({"file": {"id": "a"}}, "deltaSingleAction is missing"),
        (d_file("a", size=None), "the add action of file a has no size"),
        (d_file("a", dv={"storageType": "x", "pathOrInlineDv": "p", "sizeInBytes": 1, "cardinality": 1}),
         "deletion vector has storageType 'x'"),
        ({"protocol": {"minReaderVersion": 1}}, "invalid 'protocol' action: deltaProtocol is missing"),
    ],
)  # fmt: skip
def test_malformed_delta_lines_are_protocol_violations(make_client: Make, line: dict[str, Any], match: str) -> None:
    lines = [line, d_metadata(), end()] if "protocol" in line else [d_protocol(), d_metadata(), line, end()]
    _seen, handler = recorder(delta_answer(lines))
    with pytest.raises(ProtocolViolation, match=match):
        make_client(handler).query(TABLE)


def test_column_mapping_without_its_reader_feature_is_refused(make_client: Make) -> None:
    lines = [
        d_protocol(features=["deletionVectors"]),
        d_metadata(CM_SCHEMA, {"delta.columnMapping.mode": "name"}),
        end(),
    ]
    _seen, handler = recorder(delta_answer(lines))
    with pytest.raises(ProtocolViolation, match="does not list the columnMapping reader feature"):
        make_client(handler).metadata(TABLE)


def test_reader_version_2_means_column_mapping() -> None:
    # Before table features, reader version 2 was column mapping (Delta PROTOCOL.md).
    line = json.dumps({"protocol": {"deltaProtocol": {"minReaderVersion": 2, "minWriterVersion": 5}}})
    action = parse_delta_action(line, changes=False)
    assert action == Protocol(min_reader_version=2, min_writer_version=5)


def test_data_change_false_is_kept_on_the_action() -> None:
    line = json.dumps(d_file("a", "remove", version=1, timestamp=1, dataChange=False))
    action = parse_delta_action(line, changes=True)
    assert isinstance(action, RemoveFile) and not action.data_change
