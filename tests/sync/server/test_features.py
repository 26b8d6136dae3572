"""Tables with deletion vectors and column mapping, served like the reference server serves them.

The tables are written by the embedded Sail engine (``samples.build_feature_provider``; change
data feed crafted into the log, as Sail cannot turn it on). Parquet-only requests are refused;
the delta response format answers with the provider's own actions, presigned. The proof is the
official connector (``delta-sharing`` with ``use_delta_format=True``, i.e. Delta Kernel) reading
snapshots and time travel equal to what Sail reads from the source, and change feeds of the table
without deletion vectors (its DV change feeds are wrong by construction, see below).
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import delta_sharing
import httpx
import pandas as pd
import pytest
from deltalake import DeltaTable, TableFeatures
from support.faults import SharingServer
from support.feature_tables import z85_encode

from sharesync.sync.delta.z85 import z85_decode
from sharesync.sync.server.samples import PARTITION_COLUMN, build_feature_provider, embedded_spark

from .conftest import Scratch
from .support import ORDERS, error
from .test_connector import _value, rows

TABLES = ["dv", "cm", "dv_cm"]
DELTA = {"delta-sharing-capabilities": "responseformat=delta,parquet;readerfeatures=deletionvectors,columnmapping"}
CDF_COLUMNS = ["_change_type", "_commit_version", "_commit_timestamp"]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with embedded_spark() as session:
        session.conf.set("spark.sql.session.timeZone", "UTC")
        yield session


@pytest.fixture(scope="module")
def features(tmp_path_factory: pytest.TempPathFactory, spark: Any) -> Iterator[SharingServer]:
    root = tmp_path_factory.mktemp("features")
    build_feature_provider(root, spark=spark)
    with SharingServer(root) as server:
        server.write_profile(root.parent / f"{root.name}.share")
        yield server


@pytest.fixture
def client(features: SharingServer) -> Iterator[httpx.Client]:
    features.reset()
    with httpx.Client(base_url=features.endpoint, headers={"Authorization": f"Bearer {features.token}"}) as http:
        yield http


def _url(name: str) -> str:
    return f"/shares/features/schemas/modern/tables/{name}"


def _lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines()]


def _sail(spark: Any, server: SharingServer, name: str, version: int | None = None) -> pd.DataFrame:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return _plain(reader.load(str(server.root / "features" / "modern" / name)).toPandas())


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """bytes whatever the reader made of binary values, so rows sort and compare alike."""
    frame = frame.copy()
    frame["payload"] = frame["payload"].map(lambda v: bytes(v) if isinstance(v, bytes | bytearray) else v)
    return frame


def _latest(server: SharingServer, name: str) -> int:
    log = server.root / "features" / "modern" / name / "_delta_log"
    return max(int(p.name.split(".")[0]) for p in log.glob("*.json"))


# ---------------------------------------------------------------- negotiation


@pytest.mark.parametrize("name", TABLES)
@pytest.mark.parametrize(
    "capabilities",
    [
        None,
        "responseformat=parquet",
        "responseformat=delta",
        "responseformat=parquet;readerfeatures=deletionvectors,columnmapping",
    ],
)
def test_requests_that_cannot_read_the_features_are_refused(
    client: httpx.Client, name: str, capabilities: str | None
) -> None:
    headers = {"delta-sharing-capabilities": capabilities} if capabilities else {}
    for response in (
        client.get(f"{_url(name)}/metadata", headers=headers),
        client.post(f"{_url(name)}/query", json={}, headers=headers),
        client.get(f"{_url(name)}/changes", params={"startingVersion": 0}, headers=headers),
    ):
        body = error(response, 400)
        assert body == {"errorCode": "UNSUPPORTED_OPERATION", "message": "Unsupported Delta Table Properties"}


def test_plain_tables_answer_delta_when_only_delta_is_asked_for(api: httpx.Client) -> None:
    delta_only = api.get(f"{ORDERS}/metadata", headers={"delta-sharing-capabilities": "responseformat=delta"})
    assert delta_only.headers["delta-sharing-capabilities"] == "responseformat=delta"
    protocol, metadata = _lines(delta_only)
    assert protocol == {"protocol": {"deltaProtocol": {"minReaderVersion": 1, "minWriterVersion": 4}}}  # CDF: writer 4
    assert metadata["metaData"]["deltaMetadata"]["configuration"]["delta.enableChangeDataFeed"] == "true"
    either = api.get(f"{ORDERS}/metadata", headers={"delta-sharing-capabilities": "responseformat=delta,parquet"})
    assert either.headers["delta-sharing-capabilities"] == "responseformat=parquet"


def test_listings_name_the_feature_tables(features: SharingServer) -> None:
    client = delta_sharing.SharingClient(str(features.profile_path))
    names = sorted(f"{t.share}.{t.schema}.{t.name}" for t in client.list_all_tables())
    assert names == [f"features.modern.{name}" for name in sorted(TABLES)]


# ---------------------------------------------------------------- wire shapes


def test_metadata_in_the_delta_format(client: httpx.Client, features: SharingServer) -> None:
    response = client.get(f"{_url('dv_cm')}/metadata", headers=DELTA)
    assert response.headers["delta-sharing-capabilities"] == "responseformat=delta"
    assert response.headers["Delta-Table-Version"] == str(_latest(features, "dv_cm"))
    protocol, metadata = _lines(response)
    delta_protocol = protocol["protocol"]["deltaProtocol"]
    assert delta_protocol["minReaderVersion"] == 3 and delta_protocol["minWriterVersion"] == 7
    assert set(delta_protocol["readerFeatures"]) == {"deletionVectors", "columnMapping"}
    wrapper = metadata["metaData"]
    assert "version" not in wrapper and wrapper["numFiles"] > 0 and wrapper["size"] > 0
    delta = wrapper["deltaMetadata"]
    assert delta["configuration"]["delta.columnMapping.mode"] == "name"
    assert delta["configuration"]["delta.enableChangeDataFeed"] == "true"
    assert delta["partitionColumns"] == ["region"] and delta["format"]["provider"] == "parquet"
    schema = json.loads(delta["schemaString"])  # physical names stay in the field metadata
    assert all("delta.columnMapping.physicalName" in f["metadata"] for f in schema["fields"])
    at_one = _lines(client.get(f"{_url('dv_cm')}/metadata", params={"version": 1}, headers=DELTA))[1]
    assert at_one["metaData"]["version"] == 1


def test_files_and_deletion_vectors_in_the_delta_format(client: httpx.Client, features: SharingServer) -> None:
    features.faults.url_ttl_seconds = 60
    lines = _lines(client.post(f"{_url('dv')}/query", json={}, headers=DELTA))
    files = [line["file"] for line in lines[2:]]
    with_dv = [f for f in files if "deletionVector" in f["deltaSingleAction"]["add"]]
    assert files and with_dv
    table = features.root / "features" / "modern" / "dv"
    for file in files:
        add = file["deltaSingleAction"]["add"]
        assert set(file) >= {"id", "expirationTimestamp", "deltaSingleAction"} and "version" not in file
        assert httpx.get(add["path"]).content[:4] == b"PAR1"
    for file in with_dv:
        dv = file["deltaSingleAction"]["add"]["deletionVector"]
        assert dv["storageType"] == "p" and file["deletionVectorFileId"]
        fetched = httpx.get(dv["pathOrInlineDv"])
        assert fetched.status_code == 200
        relative = fetched.url.path.split("/files/features/modern/dv/", 1)[1]
        on_disk = (table / relative).read_bytes()
        assert fetched.content == on_disk and relative.endswith(".bin")
        start = dv.get("offset", 1)
        assert int.from_bytes(on_disk[start : start + 4], "big") == dv["sizeInBytes"]
    features.clock.advance(61)  # DV URLs expire like data URLs
    assert httpx.get(with_dv[0]["deltaSingleAction"]["add"]["deletionVector"]["pathOrInlineDv"]).status_code == 403


def test_partition_hints_prune_a_column_mapping_table(client: httpx.Client) -> None:
    """``partitionValues`` are keyed by physical name there, the hint names the logical column."""

    def files(body: dict[str, Any]) -> list[dict[str, str | None]]:
        lines = _lines(client.post(f"{_url('cm')}/query", json=body, headers=DELTA))
        return [line["file"]["deltaSingleAction"]["add"]["partitionValues"] for line in lines[2:]]

    every = files({})
    assert every and all(list(values) != [PARTITION_COLUMN] for values in every)  # physical keys
    regions = {next(iter(values.values())) for values in every}
    region = sorted(r for r in regions if r is not None)[0]
    column = {"op": "column", "name": PARTITION_COLUMN, "valueType": "string"}
    hint = {"op": "equal", "children": [column, {"op": "literal", "value": region, "valueType": "string"}]}
    pruned = files({"jsonPredicateHints": json.dumps(hint)})
    assert len(regions) > 1 and 0 < len(pruned) < len(every)
    assert {next(iter(values.values())) for values in pruned} <= {region, None}


def test_time_travel_pages_and_refresh_tokens_in_the_delta_format(client: httpx.Client) -> None:
    url = f"{_url('dv')}/query"
    old = [line["file"] for line in _lines(client.post(url, json={"version": 1}, headers=DELTA))[2:]]
    assert old and all(f["version"] == 1 and f["timestamp"] > 0 for f in old)

    everything = {f["file"]["id"] for f in _lines(client.post(url, json={}, headers=DELTA))[2:]}
    seen: list[str] = []
    body: dict[str, object] = {"maxFiles": 1}
    while True:
        *page, end = _lines(client.post(url, json=body, headers=DELTA))
        seen += [line["file"]["id"] for line in page[2:]]
        token = end["endStreamAction"].get("nextPageToken")
        if not token:
            break
        body = {"maxFiles": 1, "pageToken": token}
    assert sorted(seen) == sorted(everything) and len(seen) == len(everything)

    *first, end = _lines(client.post(url, json={"includeRefreshToken": True}, headers=DELTA))
    refreshed = _lines(client.post(url, json={"refreshToken": end["endStreamAction"]["refreshToken"]}, headers=DELTA))
    assert [f["file"]["id"] for f in refreshed[2:]] == [f["file"]["id"] for f in first[2:]]


def test_changes_in_the_delta_format(client: httpx.Client, features: SharingServer) -> None:
    latest = _latest(features, "dv")
    lines = _lines(client.get(f"{_url('dv')}/changes", params={"startingVersion": 1}, headers=DELTA))
    assert "deltaProtocol" in lines[0]["protocol"] and "version" not in lines[0]["protocol"]
    files = [line["file"] for line in lines if "file" in line]
    assert {f["version"] for f in files} <= set(range(1, latest + 1)) and all(f["timestamp"] for f in files)
    kinds = {next(iter(f["deltaSingleAction"])) for f in files}
    assert kinds == {"add", "remove"}  # no cdc files: the DVs tell which rows changed
    removed = {f["id"] for f in files if "remove" in f["deltaSingleAction"]}
    readded = {
        f["id"] for f in files if "add" in f["deltaSingleAction"] and "deletionVector" in f["deltaSingleAction"]["add"]
    }
    assert removed & readded  # a DV delete: the same file removed and added back with a new DV
    paged: list[str] = []
    params: dict[str, object] = {"startingVersion": 1, "maxFiles": 2}
    while True:
        *page, end = _lines(client.get(f"{_url('dv')}/changes", params=params, headers=DELTA))
        paged += [
            json.dumps(line["file"]["deltaSingleAction"], sort_keys=True).split("?")[0]
            for line in page
            if "file" in line
        ]
        token = end["endStreamAction"].get("nextPageToken")
        if not token:
            break
        params = {"startingVersion": 1, "maxFiles": 2, "pageToken": token}
    assert len(paged) == len(files)


def test_historical_protocol_lines(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=2)
    DeltaTable(str(table.path)).alter.add_feature(TableFeatures.TimestampWithoutTimezone, True)
    upgraded = DeltaTable(str(table.path)).version()
    params = {"startingVersion": 1, "includeHistoricalProtocol": "true"}
    lines = _lines(table.client.get(f"{table.url}/changes", params=params, headers=DELTA))
    protocols = [line["protocol"] for line in lines if "protocol" in line]
    assert protocols[0]["version"] == DeltaTable(str(table.path)).version()  # the head, stamped
    assert [p["version"] for p in protocols[1:]] == [upgraded]
    assert protocols[1]["deltaProtocol"]["readerFeatures"] == ["timestampNtz"]
    parquet = _lines(table.client.get(f"{table.url}/changes", params=params))
    assert sum("protocol" in line for line in parquet) == 1  # parquet answers ignore the flag


# ---------------------------------------------------------------- the official connector


@pytest.mark.parametrize("name", TABLES)
def test_the_official_connector_reads_snapshots_and_time_travel(features: SharingServer, spark: Any, name: str) -> None:
    url = f"{features.profile_path}#features.modern.{name}"
    for version in (None, 0, 1, 3):
        got = _plain(delta_sharing.load_as_pandas(url, use_delta_format=True, version=version))
        expected = _sail(spark, features, name, version)
        assert len(expected) > 0
        columns = sorted(expected.columns)
        assert sorted(got.columns) == columns
        assert rows(got, columns) == rows(expected, columns), version


def test_the_official_connector_reads_change_feeds(features: SharingServer, spark: Any) -> None:
    """Each version's change rows turn Sail's snapshot before it into Sail's snapshot at it.

    Only the table without deletion vectors: the connector's DV change feeds are wrong by
    construction (``delta_kernel`` 0.22.0 applies a version's DV difference to the first 1,024
    rows of each file only; tests/sync/delta/test_dv_change_feeds.py), so for DV tables it referees
    snapshots only (:func:`test_the_official_connector_reads_snapshots_and_time_travel`). These
    tables' files are smaller than 1,024 rows, so the comparison would pass, but it would pass by
    the table's size, not because the connector reads DV change feeds right.
    """
    name = "cm"
    latest = _latest(features, name)
    url = f"{features.profile_path}#features.modern.{name}"
    changes = _plain(
        delta_sharing.load_table_changes_as_pandas(
            url, starting_version=0, ending_version=latest, use_delta_format=True
        )
    )
    columns = sorted(c for c in changes.columns if c not in CDF_COLUMNS)
    assert set(changes["_commit_version"]) <= set(range(latest + 1))
    assert {"insert", "delete"} <= set(changes["_change_type"])
    previous: Counter[tuple[Any, ...]] = Counter()
    for version in range(latest + 1):
        batch = changes[changes["_commit_version"] == version]
        gone = batch[batch["_change_type"].isin(["delete", "update_preimage"])]
        new = batch[batch["_change_type"].isin(["insert", "update_postimage"])]
        after = previous - Counter(rows(gone, columns)) + Counter(rows(new, columns))
        assert Counter(rows(gone, columns)) <= previous, version  # only rows that were there are deleted
        assert after == Counter(rows(_sail(spark, features, name, version), columns)), version
        previous = after
    assert all(_value(v) is not None for v in changes["_commit_timestamp"])


def test_the_official_connector_autoresolves_to_delta(features: SharingServer, spark: Any) -> None:
    got = _plain(delta_sharing.load_as_pandas(f"{features.profile_path}#features.modern.dv"))
    expected = _sail(spark, features, "dv")
    columns = sorted(expected.columns)
    assert rows(got, columns) == rows(expected, columns)


# ---------------------------------------------------------------- crafted logs (what Sail does not write)


def _copy(features: SharingServer, name: str, root: Path) -> Path:
    target = root / "crafted" / "s" / name
    shutil.copytree(features.root / "features" / "modern" / name, target)
    return target


def _rewrite_log(table: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    for commit in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        for action in actions:
            edit(action)
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_inline_deletion_vectors_pass_unchanged(
    features: SharingServer, spark: Any, tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    table = _copy(features, "dv", tmp_path)
    inlined: set[str] = set()

    def inline(action: dict[str, Any]) -> None:
        dv = next(
            (a["deletionVector"] for a in action.values() if isinstance(a, dict) and a.get("deletionVector")), None
        )
        if dv is None or dv["storageType"] != "u":
            return
        prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        raw = (table / prefix / name if prefix else table / name).read_bytes()
        start = dv.get("offset", 1) + 4  # after the big-endian size
        text = z85_encode(raw[start : start + dv["sizeInBytes"]])
        dv.update(storageType="i", pathOrInlineDv=text)
        dv.pop("offset", None)
        inlined.add(text)

    _rewrite_log(table, inline)
    assert inlined
    server = start_server(tmp_path)
    with httpx.Client(base_url=server.endpoint, headers={"Authorization": f"Bearer {server.token}"}) as http:
        lines = _lines(http.post("/shares/crafted/schemas/s/tables/dv/query", json={}, headers=DELTA))
    dvs = [line["file"] for line in lines[2:] if "deletionVector" in line["file"]["deltaSingleAction"]["add"]]
    assert dvs and all(f["deltaSingleAction"]["add"]["deletionVector"]["storageType"] == "i" for f in dvs)
    assert all(f["deltaSingleAction"]["add"]["deletionVector"]["pathOrInlineDv"] in inlined for f in dvs)
    assert all("deletionVectorFileId" not in f for f in dvs)
    got = _plain(delta_sharing.load_as_pandas(f"{server.profile_path}#crafted.s.dv", use_delta_format=True))
    expected = _sail(spark, features, "dv")
    assert rows(got, sorted(expected.columns)) == rows(expected, sorted(expected.columns))


def test_files_with_dvs_need_a_client_that_reads_them(
    features: SharingServer, tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    """A table whose DV property was turned off still has files with DVs: the reference refuses
    those to clients that do not read DVs, whatever the properties say."""
    table = _copy(features, "dv", tmp_path)

    def disable(action: dict[str, Any]) -> None:
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.enableDeletionVectors"] = "false"

    _rewrite_log(table, disable)
    server = start_server(tmp_path)
    with httpx.Client(base_url=server.endpoint, headers={"Authorization": f"Bearer {server.token}"}) as http:
        url = "/shares/crafted/schemas/s/tables/dv/query"
        assert error(http.post(url, json={}), 400) == {
            "errorCode": "UNSUPPORTED_OPERATION",
            "message": "Deletion Vector property disabled",
        }
        assert _lines(http.post(url, json={}, headers=DELTA))[0]["protocol"]["deltaProtocol"]["minReaderVersion"] == 3
