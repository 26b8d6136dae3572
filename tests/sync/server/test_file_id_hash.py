"""``sharesync serve`` and the ``fileidhash`` header (spec "File ID Hash Header").

``/query`` and ``/changes`` accept ``parquet`` or ``delta`` in any case and echo it in lower case;
another value is a 400 before any line is sent. Both schemes here are the md5 of the file's log
path (the encoding is implementation-defined), so a file's id is the same whichever is asked for.
sharesync's client asks for a scheme and verifies the echo, over real HTTP.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest
from support.faults import SharingServer

from sharesync.sync.core.config import parse_config
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.wire import AddFile, File

from .support import actions, error

TABLE = "/shares/samples/schemas/all_types/tables/partitioned"


def _ids(response: httpx.Response) -> list[str]:
    return [a.id for a in actions(response) if isinstance(a, File | AddFile)]


@pytest.mark.parametrize("value", ["delta", "PARQUET", "Delta"])
def test_query_and_changes_echo_the_scheme_in_lower_case(api: httpx.Client, value: str) -> None:
    plain_query = api.post(f"{TABLE}/query", json={})
    plain_changes = api.get(f"{TABLE}/changes", params={"startingVersion": 0})
    query = api.post(f"{TABLE}/query", json={}, headers={"fileidhash": value})
    changes = api.get(f"{TABLE}/changes", params={"startingVersion": 0}, headers={"fileidhash": value})
    for response in (query, changes):
        assert response.headers["fileidhash"] == value.lower()
    assert "fileidhash" not in plain_query.headers and "fileidhash" not in plain_changes.headers
    assert _ids(query) == _ids(plain_query) and len(_ids(query)) > 0


def test_ids_are_the_md5_of_the_log_path(api: httpx.Client, sharing_server: SharingServer) -> None:
    table = sharing_server.root / "samples" / "all_types" / "partitioned"
    paths = {str(p.relative_to(table)) for p in table.rglob("*.parquet")}
    ids = _ids(api.post(f"{TABLE}/query", json={}, headers={"fileidhash": "delta"}))
    assert set(ids) <= {hashlib.md5(p.encode()).hexdigest() for p in paths}


@pytest.mark.parametrize("endpoint", ["query", "changes"])
def test_another_value_is_a_400(api: httpx.Client, endpoint: str) -> None:
    headers = {"fileidhash": "sha256"}
    if endpoint == "query":
        response = api.post(f"{TABLE}/query", json={}, headers=headers)
    else:
        response = api.get(f"{TABLE}/changes", params={"startingVersion": 0}, headers=headers)
    assert error(response, 400) == {
        "errorCode": "INVALID_PARAMETER_VALUE",
        "message": "Unsupported fileidhash value: 'sha256'. Supported values: delta, parquet.",
    }


def test_sharesyncs_client_asks_and_verifies(sharing_server: SharingServer, tmp_path: Path) -> None:
    profile = load_profile(sharing_server.write_profile(tmp_path / "p.share"))
    with SharingClient(profile, file_id_hash="delta") as client:
        assert client.query("samples.all_types.partitioned").files
        assert client.changes("samples.all_types.partitioned", starting_version=0).files


def test_the_config_setting_reaches_the_engines_client(sharing_server: SharingServer, tmp_path: Path) -> None:
    from sharesync.pipelines.run.sync_pass import Syncer

    raw = {"profile": str(sharing_server.write_profile(tmp_path / "p.share")), "file_id_hash": "delta"}
    syncer = Syncer(parse_config(raw, base_dir=tmp_path))
    try:
        assert syncer.resources.client_for("default").file_id_hash == "delta"
        assert syncer.resources.client_for("default").query("samples.all_types.partitioned").files
    finally:
        syncer.close()
    with pytest.raises(ConfigError, match="file_id_hash"):
        parse_config({**raw, "file_id_hash": "sha256"}, base_dir=tmp_path)
