"""As strict as the reference server, and able to fail the way real providers fail.

Refresh tokens only on first pages of latest-snapshot queries; failures after the 200 reach the
client as ``endStreamAction.errorMessage``; vacuumed files behind presigned URLs answer 404/410
from "storage"; ``/changes`` can answer with the reference servers' history errors.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from deltalake import DeltaTable
from support.faults import HISTORY_ERRORS, SharingServer

from sharesync.sync.protocol.wire import AddFile, CdfFile, EndStreamAction, File, Metadata, RemoveFile
from sharesync.sync.server.samples import apply_random_commits

from .conftest import Scratch
from .support import ORDERS, actions, error

PARTITIONED = "/shares/samples/schemas/all_types/tables/partitioned"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"version": 1, "includeRefreshToken": True}, "includeRefreshToken cannot be used when querying a specific version."),
        ({"timestamp": "2024-01-01T00:00:00Z", "includeRefreshToken": True}, "includeRefreshToken cannot be used when querying a specific version."),
        ({"startingVersion": 1, "includeRefreshToken": True}, "includeRefreshToken cannot be used when querying a specific version."),
        ({"version": 1, "refreshToken": "token"}, "refreshToken cannot be used when querying a specific version."),
        ({"pageToken": "token", "includeRefreshToken": True}, "includeRefreshToken must be used in the first page request."),
        ({"pageToken": "token", "refreshToken": "token"}, "refreshToken must be used in the first page request."),
    ],
)  # fmt: skip
def test_refresh_tokens_only_for_first_pages_of_the_latest_snapshot(
    api: httpx.Client, body: dict[str, object], message: str
) -> None:
    assert error(api.post(f"{ORDERS}/query", json=body), 400) == {
        "errorCode": "INVALID_PARAMETER_VALUE",
        "message": message,
    }


def _sizeless_remove(path: Path) -> tuple[int, str]:
    """Craft a log whose first data-changing remove records no size (the Delta protocol allows it)."""
    for commit in sorted((path / "_delta_log").glob("*.json")):
        lines = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        removes = [a["remove"] for a in lines if "remove" in a and a["remove"].get("dataChange", True)]
        if removes:
            removes[0].pop("size", None)
            commit.write_text("".join(json.dumps(a) + "\n" for a in lines))
            return int(commit.name.split(".")[0]), str(removes[0]["path"])
    raise AssertionError("the sample history has no remove")


def test_a_failure_after_the_200_ends_the_stream_with_an_error_message(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=6, seed=5)
    version, removed = _sizeless_remove(table.path)
    (table.path / removed).unlink()  # vacuumed: its size is now known nowhere
    body = {"startingVersion": version}
    # Checked before answering, the gap is lost history (400); presigning unchecked, as the
    # reference server does, the server learns it half way through the body.
    assert "is not available" in error(table.client.post(f"{table.url}/query", json=body), 400)["message"]
    table.server.faults.unchecked_presign = True
    response = table.client.post(f"{table.url}/query", json=body)
    lines = actions(response)
    end = lines[-1]
    assert isinstance(end, EndStreamAction) and end.error_message is not None
    assert removed in end.error_message and "gone from storage" in end.error_message
    assert [type(a).__name__ for a in lines[:2]] == ["Protocol", "Metadata"]


def test_presigning_unchecked_hands_out_urls_of_vacuumed_files(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=6, seed=3)
    assert DeltaTable(str(table.path)).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    params = {"startingVersion": 0}
    assert error(table.client.get(f"{table.url}/changes", params=params), 400)["errorCode"] == "INVALID_PARAMETER_VALUE"
    table.server.faults.unchecked_presign = True
    files = [
        a
        for a in actions(table.client.get(f"{table.url}/changes", params=params))
        if isinstance(a, AddFile | CdfFile | RemoveFile)
    ]
    statuses = {httpx.get(f.url).status_code for f in files}
    assert statuses == {200, 404}  # storage says what S3 says for a deleted object


def test_gone_files_answer_like_storage(api: httpx.Client, sharing_server: SharingServer) -> None:
    lines = actions(api.get(f"{PARTITIONED}/changes", params={"startingVersion": 0}))
    cdf = next(a for a in lines if isinstance(a, CdfFile))
    data = next(a for a in actions(api.post(f"{PARTITIONED}/query", json={})) if isinstance(a, File))
    faults = sharing_server.faults
    faults.gone_files = ("_change_data/",)
    gone = httpx.get(cdf.url)
    assert gone.status_code == 404 and gone.headers["content-type"] == "application/xml"
    assert "<Code>NoSuchKey</Code>" in gone.text
    assert httpx.head(cdf.url).status_code == 404
    assert httpx.get(data.url).status_code == 200  # other files are still there
    faults.gone_status, faults.budget = 410, 1
    assert httpx.get(cdf.url).status_code == 410
    assert httpx.get(cdf.url).status_code == 200  # budget spent


@pytest.mark.parametrize("kind", sorted(HISTORY_ERRORS))
def test_injected_history_errors_on_changes(api: httpx.Client, sharing_server: SharingServer, kind: str) -> None:
    faults = sharing_server.faults
    setattr(faults, "history_error", kind)  # noqa: B010 - a str, validated by the model
    faults.budget = 1
    body = error(api.get(f"{PARTITIONED}/changes", params={"startingVersion": 2}), 400)
    status, code, _ = HISTORY_ERRORS[kind]
    assert status == 400 and body["errorCode"] == code
    expected = {
        "table_files_missing": "table files missing",
        "log_truncated": "Cannot load table version 2 as the transaction log has been truncated",
        "version_not_found": "Cannot time travel Delta table to version 2. Available versions: [3, ",
        "change_data_file_not_found": "[DELTA_CHANGE_DATA_FILE_NOT_FOUND] File ",
    }[kind]
    assert expected in body["message"]
    assert api.get(f"{PARTITIONED}/changes", params={"startingVersion": 2}).status_code == 200  # budget spent
    assert api.post(f"{PARTITIONED}/query", json={}).status_code == 200  # only /changes is affected


def test_history_error_knob_is_validated(sharing_server: SharingServer) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        setattr(sharing_server.faults, "history_error", "no_such_shape")  # noqa: B010
    with pytest.raises(ValidationError):
        setattr(sharing_server.faults, "gone_status", 403)  # noqa: B010


def test_parquet_metadata_configuration_is_only_what_the_reference_sends(scratch: Callable[..., Scratch]) -> None:
    table = scratch(commits=1)
    DeltaTable(str(table.path)).alter.set_table_properties(
        {"delta.appendOnly": "false", "delta.logRetentionDuration": "interval 30 days"}
    )
    apply_random_commits(table.path, random.Random(0), 1)
    metadata = actions(table.client.get(f"{table.url}/metadata"))[1]
    assert isinstance(metadata, Metadata) and metadata.configuration == {"enableChangeDataFeed": "true"}
