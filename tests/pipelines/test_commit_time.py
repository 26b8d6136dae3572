"""The one place that says when a source version was committed, against the real local server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.faults import SharingServer

from sharesync.pipelines.run.commit_time import commit_time_after, filed_commit_times, version_commit_time
from sharesync.sync.core.timestamps import from_millis
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile

TABLE = "samples.all_types.plain"


@pytest.fixture
def client(sharing_server: SharingServer) -> Iterator[SharingClient]:
    assert sharing_server.profile_path is not None
    with SharingClient(load_profile(sharing_server.profile_path)) as client:
        yield client


def _logged_commit_ms(provider_root: Path, version: int) -> int:
    """The commit's timestamp as its writer (deltalake) recorded it in commitInfo."""
    log = provider_root / "samples" / "all_types" / "plain" / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return int(next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a))


def test_a_versions_commit_time_is_read_from_its_change_files(client: SharingClient, provider_root: Path) -> None:
    stamps = filed_commit_times(client.changes(TABLE, starting_version=1, ending_version=3))
    assert sorted(stamps) == [1, 2, 3]
    assert version_commit_time(client, TABLE, 2) == from_millis(stamps[2])
    assert abs(stamps[2] - _logged_commit_ms(provider_root, 2)) < 1000  # the commit's time, as served


def test_no_commit_time_where_the_provider_cannot_say(client: SharingClient) -> None:
    assert version_commit_time(client, TABLE, 10_000) is None  # a version that does not exist
    assert commit_time_after(client, TABLE, 3, {}, None) is None  # nothing earlier known to search from
