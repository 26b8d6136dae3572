"""``/metadata``, ``/version`` and snapshot ``/query``: versions, timestamps, pages, refresh tokens, hints."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable
from support.faults import SharingServer

from sharesync.sync.core.timestamps import from_millis, to_wire
from sharesync.sync.protocol.wire import AddFile, EndStreamAction, File, Metadata, Protocol, RemoveFile
from sharesync.sync.server.samples import apply_random_commits

from .conftest import Scratch
from .support import END_STREAM, ORDERS, actions, error

PARTITIONED = "/shares/samples/schemas/all_types/tables/partitioned"
NO_CDF = "/shares/samples/schemas/all_types/tables/no_cdf"


def _files(lines: list[object]) -> list[File]:
    return [a for a in lines if isinstance(a, File)]


def _commit_ms(path: Path, version: int) -> int:
    history = DeltaTable(str(path)).history()
    return int(next(h["timestamp"] for h in history if h["version"] == version))


def _orders_path(server: SharingServer) -> Path:
    return server.root / "demo" / "sales" / "orders"


def test_metadata_lines_and_headers(api: httpx.Client, sharing_server: SharingServer) -> None:
    response = api.get(f"{ORDERS}/metadata")
    protocol, metadata = actions(response)
    table = DeltaTable(str(_orders_path(sharing_server)))
    assert isinstance(protocol, Protocol) and protocol.min_reader_version == 1
    assert isinstance(metadata, Metadata)
    assert metadata.partition_columns == ["region"] and metadata.cdf_enabled
    assert metadata.configuration == {"enableChangeDataFeed": "true"}  # only what the reference server sends
    assert metadata.table_schema.names == [f.name for f in table.schema().fields]
    assert metadata.num_files == len(table.file_uris())
    assert response.headers["Delta-Table-Version"] == str(table.version())
    assert response.headers["content-type"] == "application/x-ndjson; charset=utf-8"
    assert response.headers["delta-sharing-capabilities"] == "responseformat=parquet"


def test_metadata_at_a_version(api: httpx.Client) -> None:
    response = api.get(f"{ORDERS}/metadata", params={"version": 1})
    metadata = actions(response)[1]
    assert response.headers["Delta-Table-Version"] == "1"
    assert isinstance(metadata, Metadata) and metadata.version == 1
    refused = api.get("/shares/samples/schemas/all_types/tables/no_cdf/metadata", params={"version": 0})
    assert "change data feed is not enabled" in error(refused, 400)["message"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"{ORDERS}/metadata", None),
        ("POST", f"{ORDERS}/query", {}),
        ("GET", f"{ORDERS}/changes?startingVersion=1", None),
    ],
)
def test_end_stream_action_only_with_the_capability(
    api: httpx.Client, method: str, path: str, body: dict[str, object] | None
) -> None:
    legacy = actions(api.request(method, path, json=body))
    assert not any(isinstance(a, EndStreamAction) for a in legacy)
    response = api.request(method, path, json=body, headers=END_STREAM)
    lines = actions(response)
    assert isinstance(lines[-1], EndStreamAction)
    assert not any(isinstance(a, EndStreamAction) for a in lines[:-1])
    assert response.headers["delta-sharing-capabilities"] == "responseformat=parquet;includeendstreamaction=true"


def test_the_official_connectors_format_negotiation_gets_parquet(api: httpx.Client) -> None:
    # delta-sharing 1.4.2 sends this and switches to its delta-format reader if "delta" comes back.
    caps = {"delta-sharing-capabilities": "responseformat=delta,parquet;readerfeatures=deletionvectors"}
    response = api.get(f"{ORDERS}/metadata", headers=caps)
    assert response.headers["delta-sharing-capabilities"] == "responseformat=parquet"


def test_latest_snapshot_lists_the_live_files(api: httpx.Client, sharing_server: SharingServer) -> None:
    table = DeltaTable(str(_orders_path(sharing_server)))
    first = _files(actions(api.post(f"{ORDERS}/query", json={})))
    second = _files(actions(api.post(f"{ORDERS}/query", json={})))
    live = {Path(uri).name for uri in table.file_uris()}
    assert {f.url.split("?")[0].rsplit("/", 1)[1] for f in first} == live
    assert [f.id for f in first] == [f.id for f in second]  # ids are stable across requests
    for file in first:
        assert file.expiration_timestamp and file.parsed_stats and file.parsed_stats.num_records
        assert file.version is None and file.timestamp is None and "region" in file.partition_values


def test_time_travel_by_version_and_timestamp(api: httpx.Client, sharing_server: SharingServer) -> None:
    path = _orders_path(sharing_server)
    response = api.post(f"{ORDERS}/query", json={"version": 2})
    lines = actions(response)
    assert response.headers["Delta-Table-Version"] == "2"
    assert isinstance(lines[1], Metadata) and lines[1].version == 2
    files = _files(lines)
    expected = {Path(u).name for u in DeltaTable(str(path), version=2).file_uris()}
    assert {f.url.split("?")[0].rsplit("/", 1)[1] for f in files} == expected
    assert {(f.version, f.timestamp) for f in files} == {(2, _commit_ms(path, 2))}

    at = to_wire(from_millis(_commit_ms(path, 3) + 1))  # just after version 3: still version 3
    by_time = api.post(f"{ORDERS}/query", json={"timestamp": at})
    assert by_time.headers["Delta-Table-Version"] == "3"


def test_version_endpoint_and_starting_timestamp(api: httpx.Client, sharing_server: SharingServer) -> None:
    path = _orders_path(sharing_server)
    latest = DeltaTable(str(path)).version()
    version = f"{ORDERS}/version"
    assert api.get(version).headers["Delta-Table-Version"] == str(latest)
    assert api.head(ORDERS).headers["Delta-Table-Version"] == str(latest)  # deprecated HEAD form
    exact = to_wire(from_millis(_commit_ms(path, 3)))
    after = to_wire(from_millis(_commit_ms(path, 3) + 1))
    assert api.get(version, params={"startingTimestamp": exact}).headers["Delta-Table-Version"] == "3"
    assert api.get(version, params={"startingTimestamp": after}).headers["Delta-Table-Version"] == "4"
    assert api.get(version, params={"startingTimestamp": "2000-01-01T00:00:00Z"}).headers["Delta-Table-Version"] == "0"
    late = error(api.get(version, params={"startingTimestamp": "2999-01-01T00:00:00Z"}), 400)
    assert "is after the latest version available" in late["message"]
    assert "Invalid startingTimestamp" in error(api.get(version, params={"startingTimestamp": "soon"}), 400)["message"]


def test_time_travel_to_a_moment_after_the_latest_commit_is_refused(
    api: httpx.Client, sharing_server: SharingServer
) -> None:
    """Reference server (Delta Kernel getSnapshotAsOfTimestamp): 400, not the latest version."""
    path = _orders_path(sharing_server)
    latest = DeltaTable(str(path)).version()
    committed = to_wire(from_millis(_commit_ms(path, latest)))
    assert api.post(f"{ORDERS}/query", json={"timestamp": committed}).headers["Delta-Table-Version"] == str(latest)
    after = to_wire(from_millis(_commit_ms(path, latest) + 1))
    for response in (
        api.post(f"{ORDERS}/query", json={"timestamp": after}),
        api.get(f"{ORDERS}/metadata", params={"timestamp": after}),
    ):
        body = error(response, 400)
        assert body["errorCode"] == "INVALID_PARAMETER_VALUE"
        assert body["message"] == (
            f"The provided timestamp ({after}) is after the latest version available to this table "
            f"(version {latest}, committed at {committed}). Please use a timestamp before or at {committed}."
        )


def _walk_query(api: httpx.Client, path: str, body: dict[str, object]) -> tuple[list[File], int]:
    files: list[File] = []
    token: str | None = None
    pages = 0
    while True:
        lines = actions(api.post(f"{path}/query", json={**body, **({"pageToken": token} if token else {})}))
        end = lines[-1]
        assert isinstance(end, EndStreamAction)
        files += _files(lines)
        pages += 1
        token = end.next_page_token
        if token is None:
            return files, pages


@pytest.mark.parametrize("body", [{}, {"version": 1}])
def test_pages_of_one_file_cover_the_snapshot_exactly_once(api: httpx.Client, body: dict[str, object]) -> None:
    whole = _files(actions(api.post(f"{PARTITIONED}/query", json=body)))
    paged, pages = _walk_query(api, PARTITIONED, {**body, "maxFiles": 1})
    assert [f.id for f in paged] == [f.id for f in whole] and pages == len(whole) > 1


def test_page_tokens_are_bound_to_their_query(api: httpx.Client) -> None:
    end = actions(api.post(f"{PARTITIONED}/query", json={"maxFiles": 1}))[-1]
    assert isinstance(end, EndStreamAction) and end.next_page_token
    changed = api.post(f"{PARTITIONED}/query", json={"maxFiles": 1, "pageToken": end.next_page_token, "limitHint": 3})
    assert "Query parameter mismatch" in error(changed, 400)["message"]
    other_table = api.post(f"{ORDERS}/query", json={"maxFiles": 1, "pageToken": end.next_page_token})
    assert "does not match the table being queried" in error(other_table, 400)["message"]
    forged = api.post(f"{ORDERS}/query", json={"pageToken": "x.y"})
    assert error(forged, 400)["message"] == "Error decoding the page token: x.y."


def test_refresh_token_reissues_the_same_files_with_fresh_urls(scratch: Callable[..., Scratch]) -> None:
    table = scratch()
    first = actions(table.client.post(f"{table.url}/query", json={"includeRefreshToken": True}))
    end = first[-1]
    assert isinstance(end, EndStreamAction) and end.refresh_token
    apply_random_commits(table.path, random.Random(5), 2)  # the table moves on meanwhile
    table.server.clock.advance(60)

    again = actions(table.client.post(f"{table.url}/query", json={"refreshToken": end.refresh_token}))
    old, new = _files(first), _files(again)
    assert [f.id for f in new] == [f.id for f in old]
    assert all(
        n.url != o.url and n.expiration_timestamp > o.expiration_timestamp for n, o in zip(new, old, strict=True)
    )
    assert [f.id for f in _files(actions(table.client.post(f"{table.url}/query", json={})))] != [f.id for f in old]

    table.server.clock.advance(7200)
    expired = table.client.post(f"{table.url}/query", json={"refreshToken": end.refresh_token})
    assert error(expired, 400)["message"] == "The refresh token has expired. Please restart the query."


def test_json_predicate_hints_prune_partitions_best_effort(api: httpx.Client) -> None:
    everything = _files(actions(api.post(f"{PARTITIONED}/query", json={})))
    hint = {"op": "equal", "children": [{"op": "column", "name": "region", "valueType": "string"},
                                        {"op": "literal", "value": "eu", "valueType": "string"}]}  # fmt: skip
    pruned = _files(actions(api.post(f"{PARTITIONED}/query", json={"jsonPredicateHints": json.dumps(hint)})))
    assert 0 < len(pruned) < len(everything)
    assert {f.partition_values["region"] for f in pruned} <= {"eu", None}  # null: unknown, kept
    broken = api.post(f"{PARTITIONED}/query", json={"jsonPredicateHints": '{"op": "nonsense"'})
    assert len(_files(actions(broken))) == len(everything)


def test_limit_hint_returns_enough_rows_in_fewer_files(api: httpx.Client) -> None:
    everything = _files(actions(api.post(f"{PARTITIONED}/query", json={})))
    limited = _files(actions(api.post(f"{PARTITIONED}/query", json={"limitHint": 1})))
    assert 1 <= len(limited) < len(everything)
    assert sum(f.parsed_stats.num_records for f in limited if f.parsed_stats and f.parsed_stats.num_records) >= 1


def test_starting_version_query_returns_data_changes(api: httpx.Client, sharing_server: SharingServer) -> None:
    path = _orders_path(sharing_server)
    response = api.post(f"{ORDERS}/query", json={"startingVersion": 1, "endingVersion": 3})
    lines = actions(response)
    assert response.headers["Delta-Table-Version"] == "1"
    assert isinstance(lines[1], Metadata) and lines[1].version == 1
    changes = [a for a in lines if isinstance(a, AddFile | RemoveFile)]
    assert changes and {a.version for a in changes} <= {1, 2, 3}
    assert all(a.timestamp == _commit_ms(path, a.version) for a in changes)
    latest = DeltaTable(str(path)).version()
    beyond = api.post(f"{ORDERS}/query", json={"startingVersion": 1, "endingVersion": latest + 1})
    assert "End version cannot be greater than the latest version" in error(beyond, 400)["message"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"version": 1, "timestamp": "2024-01-01T00:00:00Z"}, "Only one of version, timestamp, startingVersion"),
        ({"version": -1}, "table version cannot be negative."),
        (
            {"startingVersion": 3, "endingVersion": 2},
            "startingVersion(3) must be smaller than or equal to endingVersion(2).",
        ),
        ({"version": 999}, "Table version 999 does not exist: the latest version of demo.sales.orders is "),
        ({"maxFiles": 0}, "maxFiles must be a positive number."),
    ],
)
def test_invalid_query_parameters(api: httpx.Client, body: dict[str, object], message: str) -> None:
    body_ = error(api.post(f"{ORDERS}/query", json=body), 400)
    assert body_["errorCode"] == "INVALID_PARAMETER_VALUE" and message in body_["message"]


def test_malformed_body(api: httpx.Client) -> None:
    response = api.post(f"{ORDERS}/query", content=b"{not json", headers={"content-type": "application/json"})
    assert error(response, 400)["errorCode"] == "MALFORMED_REQUEST"


def test_history_needs_change_data_feed(api: httpx.Client) -> None:
    assert api.post(f"{NO_CDF}/query", json={}).status_code == 200
    refused = error(api.post(f"{NO_CDF}/query", json={"version": 0}), 400)
    assert refused["message"] == (
        "Reading table by version or timestamp is not supported because change data feed is not "
        "enabled on table: samples.all_types.no_cdf"
    )
