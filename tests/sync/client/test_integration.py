"""The client over real HTTP against the local sharing server (``tests/conftest.py``)."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from support.faults import SharingServer

from sharesync.sync.core.errors import (
    HistoryUnavailable,
    NotFound,
    ServerError,
    StreamError,
    Unauthorized,
)
from sharesync.sync.protocol.client import ChangesResult, SharingClient
from sharesync.sync.protocol.download import Downloader, DownloadOptions, ProgressUpdate
from sharesync.sync.protocol.profile import load_profile, parse_profile
from sharesync.sync.protocol.refresh import RefreshTokenRefresher, refresher_for
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.transport import Timeouts
from sharesync.sync.protocol.wire import AddFile, CdfFile, RemoveFile
from sharesync.sync.server.samples import apply_random_commits, create_sample_table, sample_rows

pytestmark = pytest.mark.timeout(60)

FAST = RetryPolicy(max_attempts=4, total_seconds=5.0, initial_backoff=0.01, max_backoff=0.05)
PARTITIONED = "samples.all_types.partitioned"


@pytest.fixture
def client(sharing_server: SharingServer) -> Iterator[SharingClient]:
    assert sharing_server.profile_path is not None
    with SharingClient(load_profile(sharing_server.profile_path), retry=FAST, timeouts=Timeouts(read=20)) as c:
        yield c


def table_version(root: Path, name: str) -> int:
    return int(DeltaTable(str(root.joinpath(*name.split(".")))).version())


# ---------------------------------------------------------------- every endpoint


def test_every_endpoint(client: SharingClient, sharing_server: SharingServer) -> None:
    shares = {s.name for s in client.list_shares()}
    assert {"demo", "samples"} <= shares
    assert client.get_share("demo").name == "demo"
    assert {s.name for s in client.list_schemas("samples")} == {"all_types"}
    assert {t.name for t in client.list_tables("samples", "all_types")} == {"partitioned", "plain", "no_cdf"}
    all_tables = {t.full_name for t in client.list_all_tables("demo")}
    assert all_tables == {"demo.sales.orders", "demo.sales.customers"}

    latest = table_version(sharing_server.root, PARTITIONED)
    assert client.table_version(PARTITIONED).version == latest
    assert client.table_version(PARTITIONED, starting_timestamp="2000-01-01T00:00:00Z").version == 0

    meta = client.metadata(PARTITIONED)
    assert meta.version == latest and meta.cdf_enabled and meta.partition_columns == ["region"]
    assert "updated_at" in meta.metadata.table_schema.names

    snapshot = client.query(PARTITIONED)
    assert snapshot.version == latest and snapshot.refresh_token and snapshot.end_stream_action is not None
    dt = DeltaTable(str(sharing_server.root / "samples" / "all_types" / "partitioned"))
    assert len(snapshot.files) == len(dt.file_uris())
    assert sum(f.size for f in snapshot.files) == snapshot.size > 0

    old = client.query(PARTITIONED, version=1)
    assert old.version == 1 and old.refresh_token is None
    ranged = client.query(PARTITIONED, starting_version=1, ending_version=2)
    assert {f.version for f in ranged.files} <= {1, 2} and all(isinstance(f, AddFile | RemoveFile) for f in ranged.files)

    changes = client.changes(PARTITIONED, starting_version=0, ending_version=latest)
    assert {f.version for f in changes.files} <= set(range(latest + 1))
    assert client.metadata("samples.all_types.no_cdf").cdf_enabled is False


def test_oauth_profile_against_the_server(sharing_server: SharingServer) -> None:
    with SharingClient(parse_profile(sharing_server.profile(oauth=True)), retry=FAST) as client:
        assert "demo" in {s.name for s in client.list_shares()}


def test_errors_from_the_server(client: SharingClient, sharing_server: SharingServer) -> None:
    with pytest.raises(NotFound, match=r"metadata of samples.all_types.nope: HTTP 404 RESOURCE_DOES_NOT_EXIST"):
        client.metadata("samples.all_types.nope")
    bad = {**sharing_server.profile(), "bearerToken": "wrong-token-123456"}
    with SharingClient(parse_profile(bad), retry=FAST) as other, pytest.raises(Unauthorized):
        other.list_shares()


# ---------------------------------------------------------------- pagination


def test_a_listing_with_pages_of_no_items_is_refused_before_it_loops(client: SharingClient) -> None:
    # The local server, like the reference, answers maxResults=0 with an empty page and a token.
    with pytest.raises(ValueError, match=r"list shares: a page size must be at least 1, got 0"):
        client.list_shares(max_results=0)


def test_tiny_pages_everywhere(client: SharingClient) -> None:
    assert [s.name for s in client.list_shares(max_results=1)] == [s.name for s in client.list_shares()]
    assert len(client.list_all_tables("samples", max_results=1)) == 3
    whole = client.query(PARTITIONED)
    paged = client.query(PARTITIONED, max_files=1)
    assert paged.pages == len(whole.files) > 1
    assert [f.id for f in paged.files] == [f.id for f in whole.files]
    assert paged.refresh_token and paged.version == whole.version
    all_changes = client.changes(PARTITIONED, starting_version=0)
    paged_changes = client.changes(PARTITIONED, starting_version=0, max_files=2)
    assert [(type(f), f.id, f.version) for f in paged_changes.files] == [
        (type(f), f.id, f.version) for f in all_changes.files
    ]
    assert paged_changes.pages == math.ceil(len(all_changes.files) / 2) > 1


def test_refresh_by_token_gives_the_same_ids_with_new_urls(client: SharingClient, sharing_server: SharingServer) -> None:
    first = client.query(PARTITIONED, max_files=2)
    sharing_server.clock.advance(5)  # a later signature time, so every URL differs
    fresh = RefreshTokenRefresher(client, first).refresh()
    assert set(fresh) == {f.id for f in first.files}
    assert all(fresh[f.id].url != f.url for f in first.files)


# ---------------------------------------------------------------- change data feed rules


@pytest.fixture(scope="module")
def cdf_provider(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``cdf.s.t``: partitioned, one commit of each kind, in a known order."""
    root = tmp_path_factory.mktemp("cdf-provider")
    path = create_sample_table(root / "cdf" / "s" / "t", rows=30, seed=11)  # v0
    rng = random.Random(5)
    write_deltalake(str(path), sample_rows(rng, [101, 102, 103]), mode="append")  # v1 insert
    dt = DeltaTable(str(path))
    dt.update(updates={"qty": "qty + 1", "name": "'updated'"}, predicate="id >= 3 AND id < 7")  # v2 update
    DeltaTable(str(path)).delete("id >= 10 AND id < 13")  # v3 delete
    source = sample_rows(rng, [1, 2, 200, 201])
    (
        DeltaTable(str(path)).merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )  # v4 merge
    DeltaTable(str(path)).delete("region = 'eu'")  # v5 whole partition: removes, no change data
    apply_random_commits(path, rng, 3)  # v6..v8: more of the same, random
    return root


def _expected_changes(path: Path, end: int) -> Counter[tuple[int, str]]:
    reader = DeltaTable(str(path)).load_cdf(starting_version=0, ending_version=end)
    table = reader.read_all()
    return Counter(zip(table.column("_commit_version").to_pylist(), table.column("_change_type").to_pylist(), strict=True))


def _downloaded_changes(client: SharingClient, result: ChangesResult, staging: Path) -> Counter[tuple[int, str]]:
    downloaded = Downloader(staging, policy=client.file_url_policy, options=DownloadOptions(concurrency=4, retry=FAST)).download(list(result.files))
    counts: Counter[tuple[int, str]] = Counter()
    for item in downloaded.files:
        f = item.file
        table = pq.read_table(item.path)
        if isinstance(f, CdfFile):
            counts.update((f.version, t) for t in table.column("_change_type").to_pylist())
        else:
            assert isinstance(f, AddFile | RemoveFile)
            counts[(f.version, "insert" if isinstance(f, AddFile) else "delete")] += table.num_rows
    return counts


def test_change_feed_follows_the_per_version_rules(
    cdf_provider: Path, start_server: Callable[..., SharingServer], tmp_path: Path
) -> None:
    server = start_server(cdf_provider)
    path = cdf_provider / "cdf" / "s" / "t"
    latest = int(DeltaTable(str(path)).version())
    with SharingClient(parse_profile(server.profile()), retry=FAST) as client:
        result = client.changes("cdf.s.t", starting_version=0, ending_version=latest, max_files=3)
    by_version: dict[int, set[str]] = {}
    for f in result.files:
        by_version.setdefault(f.version, set()).add(type(f).__name__)
        assert set(f.partition_values) == {"region"}
    # "If there are CDC actions, we read them exclusively": never cdf mixed with add/remove.
    assert all(kinds == {"CdfFile"} or "CdfFile" not in kinds for kinds in by_version.values())
    assert by_version[0] == by_version[1] == {"AddFile"}  # writes: inserts as add files
    assert by_version[2] == by_version[3] == by_version[4] == {"CdfFile"}  # update, delete, merge
    assert by_version[5] == {"RemoveFile"}  # whole-partition delete: plain removals
    # Reading what was downloaded gives exactly the changes the Delta library computes.
    assert _downloaded_changes(client, result, tmp_path / "staging") == _expected_changes(path, latest)


def test_vacuumed_history_is_history_unavailable(start_server: Callable[..., SharingServer], tmp_path: Path) -> None:
    path = create_sample_table(tmp_path / "prov" / "p" / "s" / "t", rows=5, partitioned=False, seed=1)  # v0
    v0_files = [Path(u.removeprefix("file://")) for u in DeltaTable(str(path)).file_uris()]
    write_deltalake(str(path), sample_rows(random.Random(2), [1, 2]), mode="overwrite")  # v1 replaces them
    for f in v0_files:  # what VACUUM does once v0's files are past retention
        f.unlink()
    server = start_server(tmp_path / "prov")
    with SharingClient(parse_profile(server.profile()), retry=FAST) as client:
        assert len(client.query("p.s.t").files) == 1
        with pytest.raises(HistoryUnavailable, match="is not available"):
            client.query("p.s.t", version=0)
        with pytest.raises(HistoryUnavailable):
            client.changes("p.s.t", starting_version=0)


# ---------------------------------------------------------------- faults


@pytest.mark.parametrize("fault", ["drop_end_stream_action", "truncate_stream", "drop_connection"])
def test_broken_streams_are_retried(client: SharingClient, sharing_server: SharingServer, fault: str) -> None:
    expected = [f.id for f in client.query(PARTITIONED).files]
    setattr(sharing_server.faults, fault, True)
    sharing_server.faults.budget = 1
    assert [f.id for f in client.query(PARTITIONED).files] == expected
    assert sharing_server.faults.faulted == 1


def test_an_error_inside_the_stream_fails_the_call(client: SharingClient, sharing_server: SharingServer) -> None:
    sharing_server.faults.end_stream_error = "the provider's disk is on fire"
    with pytest.raises(StreamError, match="the provider's disk is on fire"):
        client.query(PARTITIONED)


def test_injected_server_errors_are_retried_then_reported(client: SharingClient, sharing_server: SharingServer) -> None:
    sharing_server.faults.error_rate = 1.0
    sharing_server.faults.retry_after = 0
    sharing_server.faults.budget = 2
    assert client.table_version(PARTITIONED).version >= 0
    sharing_server.faults.budget = None
    with pytest.raises(ServerError, match="injected fault"):
        client.list_shares()


def test_an_expired_url_is_refreshed_mid_download(client: SharingClient, sharing_server: SharingServer, tmp_path: Path) -> None:
    sharing_server.faults.url_ttl_seconds = 1
    result = client.query(PARTITIONED)
    assert len(result.files) >= 3

    def after_first_file(update: ProgressUpdate) -> None:
        if update.files_done == 1 and update.advance == 0:
            sharing_server.clock.advance(30)  # every URL handed out so far is now stale

    downloaded = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(concurrency=1, retry=FAST)).download(
        list(result.files), refresher=refresher_for(client, result), progress=after_first_file
    )
    assert downloaded.stats.url_refreshes == 1 and downloaded.stats.files == len(result.files)
    for item in downloaded.files:
        assert item.path.stat().st_size == item.file.size


def test_urls_expiring_in_real_time_with_a_slow_store(client: SharingClient, sharing_server: SharingServer, tmp_path: Path) -> None:
    sharing_server.faults.url_ttl_seconds = 1.5
    sharing_server.faults.download_delay_seconds = 0.8
    result = client.changes(PARTITIONED, starting_version=1, ending_version=2)
    files = list(result.files)[:3]
    assert len(files) >= 2  # served one after another, 0.8 s each: the second URL is stale by then
    downloaded = Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(concurrency=1, retry=FAST)).download(files, refresher=refresher_for(client, result))
    assert downloaded.stats.url_refreshes >= 1 and downloaded.stats.files == len(files)


def test_wrong_sizes_from_the_store_are_caught(client: SharingClient, sharing_server: SharingServer, tmp_path: Path) -> None:
    from sharesync.sync.core.errors import DownloadError

    result = client.query(PARTITIONED)
    sharing_server.faults.file_size_delta = 7
    with pytest.raises(DownloadError, match="longer than the declared size"):
        Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=FAST)).download(list(result.files)[:1])
    sharing_server.faults.file_size_delta = -7
    with pytest.raises(DownloadError, match="the server declared"):
        Downloader(tmp_path, policy=client.file_url_policy, options=DownloadOptions(retry=FAST)).download(list(result.files)[:1])
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".parquet", ".part")]

