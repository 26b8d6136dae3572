"""The one place that says when a source version was committed, against the real local server."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.faults import SharingServer

from sharesync.sync.core.timestamps import from_millis, to_millis
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.commit_time import filed_commit_times, version_commit_time
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.server.samples import apply_random_commits, create_sample_table

TABLE = "samples.all_types.plain"


@pytest.fixture
def client(sharing_server: SharingServer) -> Iterator[SharingClient]:
    assert sharing_server.profile_path is not None
    with SharingClient(load_profile(sharing_server.profile_path)) as client:
        yield client


def _logged_commit_ms(table: Path, version: int) -> int:
    """The commit's timestamp as its writer (deltalake) recorded it in commitInfo."""
    log = table / "_delta_log" / f"{version:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return int(next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a))


def test_a_versions_commit_time_is_read_from_its_change_files(client: SharingClient, provider_root: Path) -> None:
    stamps = filed_commit_times(client.changes(TABLE, starting_version=1, ending_version=3))
    assert sorted(stamps) == [1, 2, 3]
    assert version_commit_time(client, TABLE, 2) == from_millis(stamps[2])
    assert abs(stamps[2] - _logged_commit_ms(provider_root / "samples" / "all_types" / "plain", 2)) < 1000  # the commit's time, as served


def test_no_commit_time_where_the_provider_cannot_say(client: SharingClient) -> None:
    assert version_commit_time(client, TABLE, 10_000) is None  # a version that does not exist
    assert version_commit_time(client, TABLE, 3, stamps={}) is None  # nothing earlier known to search from


def test_a_version_without_files_has_one_commit_time_for_the_run_and_dagster(
    tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    """Issue 41: the Dagster layer (freshness) read a file-less version's commit time as unknown while
    the run searched for it; both now ask :func:`version_commit_time` with the earlier time they know."""
    path = create_sample_table(tmp_path / "root" / "s" / "c" / "t", rows=5, seed=4)
    apply_random_commits(path, random.Random(4), 1)  # version 1: data
    DeltaTable(path).alter.set_table_properties({"delta.logRetentionDuration": "interval 30 days"})  # 2: none
    server = start_server(tmp_path / "root")
    assert server.profile_path is not None
    with SharingClient(load_profile(server.profile_path)) as client:
        batch = filed_commit_times(client.changes("s.c.t", starting_version=1, ending_version=2))
        assert sorted(batch) == [1]  # the metadata-only commit has no file to date it
        previous = from_millis(batch[1])
        run = version_commit_time(client, "s.c.t", 2, stamps=batch, previous=previous)  # the batch's last version
        dagster = version_commit_time(client, "s.c.t", 2, previous=previous)  # freshness: after the checkpoint's
    assert run == dagster
    assert run is not None and run >= previous
    assert abs(to_millis(run) - _logged_commit_ms(path, 2)) < 1000
