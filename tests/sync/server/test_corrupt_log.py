"""A commit file that is not JSON is a clean 500 naming the commit, not an unhandled exception."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.faults import SharingServer

from sharesync.sync.server.samples import create_sample_table, table_path

from .support import error


def test_a_commit_that_is_not_json_is_a_clean_internal_error(
    tmp_path: Path, start_server: Callable[..., SharingServer], caplog: pytest.LogCaptureFixture
) -> None:
    path = create_sample_table(table_path(tmp_path, "s", "t", "broken"), rows=3, seed=1)
    (path / "_delta_log" / "00000000000000000001.json").write_text('{"commitInfo": {"timestamp": 1}}\n{not json\n')
    server = start_server(tmp_path)
    with (
        caplog.at_level(logging.WARNING),
        httpx.Client(base_url=server.endpoint, headers={"Authorization": f"Bearer {server.token}"}) as api,
    ):
        body = error(api.get("/shares/s/schemas/t/tables/broken/metadata"), 500)
    assert "commit 1 of the Delta log is not valid JSON" in body["message"]
    assert not any(record.exc_info for record in caplog.records), "the server logged a traceback"
