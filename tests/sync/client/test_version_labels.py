"""The version an answer is labelled with, compared with the one asked for (issue 40 §1.1), over loopback HTTP.

The local server plays a provider that honours time travel but labels every answer with its
latest version (``label_version``), one that answers ``/changes`` past the range asked for
(``ignore_ending_version``) and one that answers ``/metadata?version=`` with its latest metadata
(``ignore_metadata_version``). The real client must refuse each answer, naming both versions;
a well-behaved server's answers to the same requests must pass untouched.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.faults import SharingServer

from sharesync.sync.core.errors import VersionMismatch
from sharesync.sync.core.timestamps import from_millis
from sharesync.sync.protocol.asyncquery import Submission
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.retry import PollPolicy, RetryPolicy

TABLE = "samples.all_types.partitioned"


@pytest.fixture
def client(sharing_server: SharingServer) -> Iterator[SharingClient]:
    polling = PollPolicy(initial=0.0, max_wait=0.0, timeout=1.0, sleep=lambda _: None)
    with SharingClient(
        load_profile(sharing_server.profile_path), retry=RetryPolicy(max_attempts=1), polling=polling
    ) as c:
        yield c


@pytest.fixture
def latest(client: SharingClient) -> int:
    version = client.table_version(TABLE).version
    assert version >= 3, "the sample table needs a few versions for these tests to mean anything"
    return version


class MemoryLog:
    """Where the client keeps an asynchronous query's submission until it is read."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Submission] = {}

    def load(self, table: str, request_key: str) -> Submission | None:
        return self.rows.get((table, request_key))

    def save(self, submission: Submission) -> None:
        self.rows[(submission.table, submission.request_key)] = submission

    def clear(self, table: str, request_key: str) -> None:
        self.rows.pop((table, request_key), None)


def test_a_well_behaved_server_passes_every_check(client: SharingClient, latest: int) -> None:
    at_one = client.query(TABLE, version=1)
    assert at_one.version == 1
    stamp = max(f.timestamp for f in at_one.files if f.timestamp is not None)  # type: ignore[union-attr]
    assert client.query(TABLE, timestamp=from_millis(stamp)).version == 1
    assert client.query(TABLE, starting_version=1, ending_version=2).version == 1
    assert client.changes(TABLE, starting_version=1, ending_version=2, include_historical_metadata=True).version == 1
    assert client.changes(TABLE, starting_timestamp=from_millis(stamp)).files
    assert client.metadata(TABLE, version=1).version == 1
    assert client.query(TABLE).version == latest


def test_a_snapshot_labelled_with_the_latest_version_is_refused(
    client: SharingClient, sharing_server: SharingServer, latest: int
) -> None:
    sharing_server.faults.label_version = latest
    asked_for = rf"answered version {latest} \(Delta-Table-Version header\) for a request of version 1; nothing"
    with pytest.raises(VersionMismatch, match=asked_for + " was written — the provider does not honour time travel"):
        client.query(TABLE, version=1)
    assert client.query(TABLE).version == latest  # the latest snapshot is what its label says


def test_an_async_answer_labelled_with_the_latest_version_is_refused(
    client: SharingClient, sharing_server: SharingServer, latest: int
) -> None:
    sharing_server.queries.after_polls = 1
    sharing_server.faults.label_version = latest
    log = MemoryLog()
    with pytest.raises(VersionMismatch, match=rf"answered version {latest} .* for a request of version 1;"):
        client.query(TABLE, version=1, submissions=log)
    assert sharing_server.queries.submissions == 1  # it was answered asynchronously


def test_a_time_travel_by_timestamp_whose_labels_disagree_is_refused(
    client: SharingClient, sharing_server: SharingServer, latest: int
) -> None:
    """The version at a timestamp cannot be compared by equality; its files' labels can."""
    stamp = max(f.timestamp for f in client.query(TABLE, version=1).files if f.timestamp is not None)  # type: ignore[union-attr]
    sharing_server.faults.label_version = latest
    with pytest.raises(VersionMismatch, match=r"answered file \S+ of version 1 for a request as of"):
        client.query(TABLE, timestamp=from_millis(stamp))


def test_a_change_feed_past_its_ending_version_is_refused(
    client: SharingClient, sharing_server: SharingServer, latest: int
) -> None:
    sharing_server.faults.ignore_ending_version = True
    with pytest.raises(VersionMismatch, match=r"answered file \S+ of version 2 for a request of versions 1\.\.1;"):
        client.changes(TABLE, starting_version=1, ending_version=1)


def test_a_change_feed_labelled_with_the_latest_version_is_refused(
    client: SharingClient, sharing_server: SharingServer, latest: int
) -> None:
    sharing_server.faults.label_version = latest
    with pytest.raises(VersionMismatch, match=rf"answered version {latest} \(Delta-Table-Version header\) for a "):
        client.changes(TABLE, starting_version=1, ending_version=2, include_historical_metadata=True)


def test_metadata_at_a_version_the_server_ignored_is_refused(
    client: SharingClient, sharing_server: SharingServer, latest: int
) -> None:
    sharing_server.faults.ignore_metadata_version = True
    with pytest.raises(VersionMismatch, match=rf"answered version {latest} for a request of version 1;"):
        client.metadata(TABLE, version=1)
