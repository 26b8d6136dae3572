"""``/changes``: what each version serves, version and timestamp bounds, pages, and lost history."""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable, write_deltalake
from support.faults import SharingServer

from sharesync.sync.core.timestamps import from_millis, to_wire
from sharesync.sync.protocol.wire import AddFile, CdfFile, EndStreamAction, Metadata, RemoveFile
from sharesync.sync.server.samples import sample_rows

from .conftest import Scratch
from .support import actions, error

PARTITIONED = "/shares/samples/schemas/all_types/tables/partitioned"
FileLine = AddFile | CdfFile | RemoveFile


def _log_actions(table: Path, version: int) -> list[dict[str, dict[str, object]]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _expected_lines(table: Path, version: int) -> list[tuple[str, str]]:
    """The spec/reference rule, computed straight from the log: cdc files, else data-changing
    add/remove, in the log's order (the reference server keeps it)."""
    log = _log_actions(table, version)
    cdc = [("cdf", str(a["cdc"]["path"])) for a in log if "cdc" in a]
    if cdc:
        return cdc
    return [
        (kind, str(a[kind]["path"])) for a in log for kind in ("add", "remove") if kind in a and a[kind]["dataChange"]
    ]


def _kind(line: FileLine) -> str:
    return {AddFile: "add", CdfFile: "cdf", RemoveFile: "remove"}[type(line)]


def _file_lines(lines: list[object]) -> list[FileLine]:
    return [a for a in lines if isinstance(a, AddFile | CdfFile | RemoveFile)]


def test_each_version_serves_its_cdc_files_or_else_its_add_and_remove_files(
    api: httpx.Client, sharing_server: SharingServer
) -> None:
    path = sharing_server.root / "samples" / "all_types" / "partitioned"
    latest = DeltaTable(str(path)).version()
    response = api.get(f"{PARTITIONED}/changes", params={"startingVersion": 0})
    assert response.headers["Delta-Table-Version"] == "0"
    lines = _file_lines(actions(response))
    history = {h["version"]: int(h["timestamp"]) for h in DeltaTable(str(path)).history()}
    kinds_seen = set()
    for version in range(latest + 1):
        served = [line for line in lines if line.version == version]
        expected = [(k, hashlib.md5(p.encode()).hexdigest()) for k, p in _expected_lines(path, version)]
        assert [(_kind(s), s.id) for s in served] == expected, version
        assert {s.timestamp for s in served} <= {history[version]}
        kinds_seen |= {_kind(s) for s in served}
    assert kinds_seen == {"add", "cdf", "remove"}  # the sample history exercises both rules


@pytest.mark.parametrize("max_files", [1, 3])
def test_pages_cover_the_range_exactly_once(api: httpx.Client, max_files: int) -> None:
    whole = _file_lines(actions(api.get(f"{PARTITIONED}/changes", params={"startingVersion": 1})))
    paged: list[FileLine] = []
    token = None
    while True:
        params: dict[str, str | int] = {"startingVersion": 1, "maxFiles": max_files}
        if token:
            params["pageToken"] = token
        response = api.get(f"{PARTITIONED}/changes", params=params)
        lines = actions(response)
        assert response.headers["Delta-Table-Version"] == "1"
        assert len(_file_lines(lines)) <= max_files and isinstance(lines[-1], EndStreamAction)
        paged += _file_lines(lines)
        token = lines[-1].next_page_token
        if not token:
            break
    assert [(f.version, f.id) for f in paged] == [(f.version, f.id) for f in whole]


def test_ending_version_and_timestamps_bound_the_range(api: httpx.Client, sharing_server: SharingServer) -> None:
    path = sharing_server.root / "samples" / "all_types" / "partitioned"
    history = {h["version"]: int(h["timestamp"]) for h in DeltaTable(str(path)).history()}
    by_version = _file_lines(
        actions(api.get(f"{PARTITIONED}/changes", params={"startingVersion": 2, "endingVersion": 4}))
    )
    assert {f.version for f in by_version} <= {2, 3, 4}
    params = {
        "startingTimestamp": to_wire(from_millis(history[2])),
        "endingTimestamp": to_wire(from_millis(history[4])),
    }
    by_time = _file_lines(actions(api.get(f"{PARTITIONED}/changes", params=params)))
    assert [(f.version, f.id) for f in by_time] == [(f.version, f.id) for f in by_version]
    clamped = api.get(f"{PARTITIONED}/changes", params={"startingVersion": 2, "endingVersion": 10_000})
    assert max(f.version for f in _file_lines(actions(clamped))) <= max(history)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "No startingVersion or startingTimestamp provided for CDF read."),
        ({"startingVersion": 1, "startingTimestamp": "2024-01-01T00:00:00Z"}, "Multiple starting arguments"),
        ({"startingVersion": "one"}, "startingVersion is not a valid number."),
        (
            {"startingVersion": 3, "endingVersion": 1},
            "CDF range from start 3 to end 1 was invalid. End cannot be before start.",
        ),
    ],
)
def test_invalid_change_parameters(api: httpx.Client, params: dict[str, object], message: str) -> None:
    body = error(api.get(f"{PARTITIONED}/changes", params=params), 400)
    assert body["errorCode"] == "INVALID_PARAMETER_VALUE" and message in body["message"]


def test_starting_version_past_the_latest(api: httpx.Client, sharing_server: SharingServer) -> None:
    latest = DeltaTable(str(sharing_server.root / "samples" / "all_types" / "partitioned")).version()
    body = error(api.get(f"{PARTITIONED}/changes", params={"startingVersion": latest + 1}), 400)
    assert body["message"] == (
        f"Provided Start version({latest + 1}) for reading change data is invalid. "
        f"Start version cannot be greater than the latest version of the table({latest})."
    )


def test_cdf_disabled_table(api: httpx.Client) -> None:
    body = error(api.get("/shares/samples/schemas/all_types/tables/no_cdf/changes", params={"startingVersion": 0}), 400)
    assert body == {
        "errorCode": "INVALID_PARAMETER_VALUE",
        "message": "cdf is not enabled on table samples.all_types.no_cdf",
    }


def test_historical_metadata_lines(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=2)
    DeltaTable(str(table.path)).alter.set_table_properties({"delta.appendOnly": "false"})
    changed = DeltaTable(str(table.path)).version()
    with_history = actions(
        table.client.get(f"{table.url}/changes", params={"startingVersion": 1, "includeHistoricalMetadata": "true"})
    )
    head, *rest = [a for a in with_history if isinstance(a, Metadata)]
    assert head.version == 1 and [m.version for m in rest] == [changed]
    # Parquet answers carry only the reference server's key; the delta format the whole configuration.
    assert rest[0].configuration == {"enableChangeDataFeed": "true"}
    delta = table.client.get(
        f"{table.url}/changes",
        params={"startingVersion": 1, "includeHistoricalMetadata": "true"},
        headers={"delta-sharing-capabilities": "responseformat=delta"},
    )
    configurations = [
        line["metaData"]["deltaMetadata"]["configuration"]
        for line in map(json.loads, delta.text.splitlines())
        if "metaData" in line and line["metaData"]["version"] == changed
    ]
    assert configurations and configurations[0]["delta.appendOnly"] == "false"
    without = actions(table.client.get(f"{table.url}/changes", params={"startingVersion": 1}))
    assert [m.version for m in without if isinstance(m, Metadata)] == [None]  # latest metadata only, unversioned


@pytest.mark.parametrize("response_format", ["parquet", "delta"])
def test_metadata_carries_a_version_only_with_historical_metadata(api: httpx.Client, response_format: str) -> None:
    """Spec "Metadata": ``version`` is returned for "cdf query with includeHistoricalMetadata set to true"."""
    headers = {"delta-sharing-capabilities": f"responseformat={response_format}"}

    def metadata_lines(**extra: str) -> list[dict[str, object]]:
        response = api.get(f"{PARTITIONED}/changes", params={"startingVersion": 1, **extra}, headers=headers)
        assert response.headers["delta-sharing-capabilities"] == f"responseformat={response_format}"
        return [line["metaData"] for line in map(json.loads, response.text.splitlines()) if "metaData" in line]

    plain = metadata_lines()
    assert len(plain) == 1 and "version" not in plain[0]
    versioned = metadata_lines(includeHistoricalMetadata="true")
    assert versioned[0]["version"] == 1 and all("version" in m for m in versioned)


# ---------------------------------------------------------------- lost history


def _unavailable(response: httpx.Response, earliest: int) -> None:
    body = error(response, 400)
    assert body["errorCode"] == "INVALID_PARAMETER_VALUE"
    assert "is not available" in body["message"]
    assert f"the earliest available version is {earliest}" in body["message"]


def test_log_cleanup_makes_old_versions_unavailable(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=6)
    dt = DeltaTable(str(table.path))
    expected_latest = {Path(u).name for u in dt.file_uris()}
    DeltaTable(str(table.path), version=3).create_checkpoint()
    for version in range(3):  # what log cleanup does: commits older than the checkpoint go
        (table.path / "_delta_log" / f"{version:020d}.json").unlink()

    _unavailable(table.client.get(f"{table.url}/changes", params={"startingVersion": 1}), 3)
    _unavailable(table.client.post(f"{table.url}/query", json={"startingVersion": 2}), 3)
    _unavailable(table.client.post(f"{table.url}/query", json={"version": 2}), 3)
    _unavailable(table.client.get(f"{table.url}/version", params={"startingTimestamp": "2000-01-01T00:00:00Z"}), 3)
    assert table.client.get(f"{table.url}/changes", params={"startingVersion": 3}).status_code == 200

    from_checkpoint = actions(table.client.post(f"{table.url}/query", json={"version": 3}))
    expected_v3 = {Path(u).name for u in DeltaTable(str(table.path), version=3).file_uris()}
    assert {a.url.split("?")[0].rsplit("/", 1)[1] for a in from_checkpoint if hasattr(a, "url")} == expected_v3
    latest = actions(table.client.post(f"{table.url}/query", json={}))
    assert {a.url.split("?")[0].rsplit("/", 1)[1] for a in latest if hasattr(a, "url")} == expected_latest


def test_vacuum_makes_versions_with_deleted_files_unavailable(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=6, seed=3)
    assert DeltaTable(str(table.path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    write_deltalake(str(table.path), sample_rows(random.Random(1), [1000]), mode="append")  # history goes on
    latest = DeltaTable(str(table.path)).version()

    def changes_intact(version: int) -> bool:
        return all((table.path / p).is_file() for _, p in _expected_lines(table.path, version))

    def snapshot_intact(version: int) -> bool:
        return all(Path(u).is_file() for u in DeltaTable(str(table.path), version=version).file_uris())

    first_change = next(v for v in range(latest, -1, -1) if not changes_intact(v)) + 1
    first_snapshot = next(v for v in range(latest + 1) if snapshot_intact(v))
    assert 0 < first_change <= latest and 0 < first_snapshot <= latest  # vacuum did remove history

    _unavailable(table.client.get(f"{table.url}/changes", params={"startingVersion": 0}), first_change)
    assert table.client.get(f"{table.url}/changes", params={"startingVersion": first_change}).status_code == 200
    _unavailable(table.client.post(f"{table.url}/query", json={"version": first_snapshot - 1}), first_snapshot)
    assert table.client.post(f"{table.url}/query", json={"version": first_snapshot}).status_code == 200
