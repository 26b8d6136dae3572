"""Presigned-URL downloads: parallel, size-checked, atomic, refreshing expired URLs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import DownloadError, NotFound, TransportError, UrlExpired
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.download import (
    MAX_REFRESHES_PER_FILE,
    DownloadedFile,
    Downloader,
    DownloadOptions,
    ProgressUpdate,
    staged_name,
)
from sharesync.sync.protocol.refresh import RefreshTokenRefresher, RequeryRefresher, refresher_for
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.wire import AddFile, CdfFile, DataFile, File, RemoveFile

from .conftest import FakeClock, end, file, metadata, ndjson, protocol

NOW = 1_700_000_000.0  # wall clock of the tests, epoch seconds
STORAGE = FileUrlPolicy("https://sharing.example.com/delta-sharing")  # its files are on public hosts


def data(file_id: str, size: int) -> bytes:
    return (file_id.encode() * size)[:size]


def make_file(file_id: str, size: int = 100, *, gen: int = 0, expires: float | None = None) -> File:
    url = f"https://bucket.example.com/{file_id}.parquet?gen={gen}&X-Amz-Signature=sig-{file_id}-{gen}"
    exp = int(expires * 1000) if expires is not None else None
    return File(url=url, id=file_id, size=size, partition_values={}, expiration_timestamp=exp)


class Storage:
    """A presigned-URL store: serves ``data(id, size)``, refuses generations older than ``valid_gen``."""

    def __init__(self, sizes: Mapping[str, int], *, valid_gen: int = 0) -> None:
        self.sizes = dict(sizes)
        self.valid_gen = valid_gen
        self.requests: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.body_override: dict[str, bytes] = {}
        self.failures: dict[str, list[httpx.Response | Exception]] = {}

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        file_id = request.url.path.strip("/").removesuffix(".parquet")
        self.requests.append(f"{file_id}@{request.url.params['gen']}")
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if self.failures.get(file_id):
                item = self.failures[file_id].pop(0)
                if isinstance(item, Exception):
                    raise item
                return item
            if int(request.url.params["gen"]) < self.valid_gen:
                return httpx.Response(403, text="<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>")
            return httpx.Response(200, content=self.body_override.get(file_id, data(file_id, self.sizes[file_id])))
        finally:
            self.in_flight -= 1


class Refresher:
    def __init__(self, storage: Storage, files: list[DataFile], min_url_expiration_ms: int | None = None) -> None:
        self.storage, self.files, self.calls = storage, files, 0
        self.min_url_expiration_ms = min_url_expiration_ms

    def refresh(self) -> Mapping[str, DataFile]:
        self.calls += 1
        self.storage.valid_gen = self.calls
        return {f.id: make_file(f.id, f.size, gen=self.calls, expires=NOW + 3600) for f in self.files}


@pytest.fixture
def downloader(tmp_path: Path, retry: RetryPolicy) -> Callable[..., Downloader]:
    def make(storage: Storage, **kwargs: Any) -> Downloader:
        kwargs.setdefault("retry", retry)
        options = DownloadOptions(transport=httpx.MockTransport(storage), clock=lambda: NOW, **kwargs)
        return Downloader(tmp_path / "staging", policy=STORAGE, options=options)

    return make


def test_files_download_in_parallel_within_the_bound(downloader: Callable[..., Downloader]) -> None:
    sizes = {f"f{i}": 1000 + i for i in range(12)}
    storage = Storage(sizes)
    files = [make_file(fid, size) for fid, size in sizes.items()]
    result = downloader(storage, concurrency=3, chunk_size=256).download(files)
    assert [d.file for d in result.files] == files
    for d in result.files:
        assert d.path.read_bytes() == data(d.file.id, d.file.size) and d.path.parent.name == "staging"
    assert 1 < storage.max_in_flight <= 3
    assert (result.stats.files, result.stats.bytes, result.stats.url_refreshes) == (12, sum(sizes.values()), 0)
    assert not list(result.files[0].path.parent.glob("*.part"))


def test_a_short_body_is_a_download_error_and_leaves_nothing(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 100})
    storage.body_override["a"] = b"x" * 60
    d = downloader(storage)
    with pytest.raises(DownloadError, match=r"received 60 bytes, the server declared 100"):
        d.download([make_file("a")])
    assert len(storage.requests) == 5  # DownloadError is retried
    assert list(d.staging_dir.iterdir()) == []


def test_a_long_body_is_stopped_at_the_declared_size(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 100})
    storage.body_override["a"] = b"x" * 10_000
    d = downloader(storage, chunk_size=64)
    with pytest.raises(DownloadError, match="longer than the declared size; stopped"):
        d.download([make_file("a")], progress=None)
    assert list(d.staging_dir.iterdir()) == []


def test_a_transient_failure_is_retried(downloader: Callable[..., Downloader], clock: FakeClock) -> None:
    storage = Storage({"a": 50})
    storage.failures["a"] = [httpx.Response(503), httpx.ConnectError("reset"), httpx.Response(429, headers={"Retry-After": "2"})]
    result = downloader(storage).download([make_file("a", 50)])
    assert result.stats.retries == 3 and result.files[0].path.read_bytes() == data("a", 50)
    assert clock.sleeps[-1] == 2.0


def test_a_missing_file_is_not_retried(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 50})
    storage.failures["a"] = [httpx.Response(404, text="NoSuchKey")]
    with pytest.raises(NotFound):
        downloader(storage).download([make_file("a", 50)])
    assert len(storage.requests) == 1


def test_an_expired_url_is_refreshed_once_for_all_files(downloader: Callable[..., Downloader]) -> None:
    sizes = {f"f{i}": 64 for i in range(6)}
    storage = Storage(sizes, valid_gen=1)  # every URL handed out is already refused
    files = [make_file(fid, 64) for fid in sizes]
    refresher = Refresher(storage, files)
    result = downloader(storage, concurrency=6).download(files, refresher=refresher)
    assert refresher.calls == 1 and result.stats.url_refreshes == 1  # single-flight
    assert all(d.path.read_bytes() == data(d.file.id, 64) for d in result.files)
    assert sorted(r for r in storage.requests if r.endswith("@1")) == sorted(f"{f}@1" for f in sizes)


def test_a_refused_token_is_renewed_like_an_expired_url(downloader: Callable[..., Downloader]) -> None:
    """GCS answers a revoked or expired OAuth token with a plain 401: renewed at once, not failed."""
    storage = Storage({"a": 10})
    storage.failures["a"] = [httpx.Response(401, text='{"error": {"code": 401, "message": "Invalid Credentials"}}')]
    refresher = Refresher(storage, [make_file("a", 10)])
    result = downloader(storage).download([make_file("a", 10)], refresher=refresher)
    assert refresher.calls == 1 and result.stats.url_refreshes == 1
    assert result.files[0].path.read_bytes() == data("a", 10)


def test_without_a_refresher_an_expired_url_fails_clearly(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 10}, valid_gen=1)
    with pytest.raises(UrlExpired, match=r"download file a .*HTTP 403.*expired or was refused\); no way to renew") as info:
        downloader(storage).download([make_file("a", 10)])
    assert "sig-a-0" not in str(info.value)


def test_urls_about_to_expire_are_refreshed_before_use(tmp_path: Path, retry: RetryPolicy) -> None:
    storage = Storage({"a": 10, "b": 10})
    files = [make_file("a", 10, expires=NOW + 30), make_file("b", 10, expires=NOW + 3600)]
    refresher = Refresher(storage, files)
    # received at NOW with 30 s to live; 25 s later less than a quarter of that lifetime is left
    times = iter([NOW] + [NOW + 25] * 100)
    d = Downloader(tmp_path, policy=STORAGE, options=DownloadOptions(transport=httpx.MockTransport(storage), retry=retry, concurrency=1, clock=lambda: next(times)))
    d.download(files, refresher=refresher)
    assert refresher.calls == 1
    assert "a@0" not in storage.requests  # never tried the URL that was about to expire
    assert storage.requests[0] == "a@1"


@pytest.mark.parametrize("own_expiry", [NOW + 3600, None])
def test_the_answers_min_url_expiration_bounds_every_url(
    tmp_path: Path, retry: RetryPolicy, own_expiry: float | None
) -> None:
    # The file says it lives an hour (or says nothing); the answer's endStreamAction says 30 s.
    storage = Storage({"a": 10})
    files = [make_file("a", 10, expires=own_expiry)]
    refresher = Refresher(storage, files, min_url_expiration_ms=int((NOW + 30) * 1000))
    times = iter([NOW] + [NOW + 25] * 100)
    d = Downloader(tmp_path, policy=STORAGE, options=DownloadOptions(transport=httpx.MockTransport(storage), retry=retry, clock=lambda: next(times)))
    d.download(files, refresher=refresher)
    assert refresher.calls == 1 and storage.requests == ["a@1"]  # renewed before the bound, not after a 403


def test_without_a_bound_a_long_lived_url_is_used_as_is(tmp_path: Path, retry: RetryPolicy) -> None:
    storage = Storage({"a": 10})
    files = [make_file("a", 10, expires=NOW + 3600)]
    refresher = Refresher(storage, files)
    times = iter([NOW] + [NOW + 25] * 100)
    Downloader(tmp_path, policy=STORAGE, options=DownloadOptions(transport=httpx.MockTransport(storage), retry=retry, clock=lambda: next(times))).download(
        files, refresher=refresher
    )
    assert refresher.calls == 0 and storage.requests == ["a@0"]


def test_refreshing_does_not_loop_forever(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 10}, valid_gen=99)
    files: list[DataFile] = [make_file("a", 10)]
    refresher = Refresher(storage, files)
    storage_gen = storage.valid_gen

    def stubborn() -> Mapping[str, DataFile]:
        refresher.calls += 1
        return {"a": make_file("a", 10, gen=refresher.calls)}

    refresher.refresh = stubborn  # type: ignore[method-assign]
    with pytest.raises(UrlExpired):
        downloader(storage).download(files, refresher=refresher)
    assert refresher.calls == MAX_REFRESHES_PER_FILE and storage.valid_gen == storage_gen


def test_hook_runs_in_a_worker_thread_as_files_complete(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 10, "b": 20})
    seen: list[tuple[str, str, bool]] = []

    def hook(done: DownloadedFile) -> None:
        seen.append((done.file.id, threading.current_thread().name, done.path.exists()))

    downloader(storage).download([make_file("a", 10), make_file("b", 20)], on_file=hook)
    assert sorted(s[0] for s in seen) == ["a", "b"]
    assert all(name.startswith("sharesync-hook") and exists for _, name, exists in seen)


def test_a_failing_hook_fails_the_download(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 10})

    def hook(done: DownloadedFile) -> None:
        raise DownloadError("cannot stage it")

    with pytest.raises(DownloadError, match="cannot stage it"):
        downloader(storage).download([make_file("a", 10)], on_file=hook)


def test_progress_adds_up_to_the_bytes(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 1000, "b": 10})
    storage.failures["a"] = [httpx.ReadError("reset")]  # fails before a body: nothing to undo
    updates: list[ProgressUpdate] = []
    downloader(storage, chunk_size=100).download([make_file("a", 1000), make_file("b", 10)], progress=updates.append)
    assert sum(u.advance for u in updates) == 1010
    assert updates[-1].files_done == 2 and updates[-1].files_total == 2


class BreakingStream(httpx.AsyncByteStream):
    def __init__(self, body: bytes, at: int) -> None:
        self.body, self.at = body, at

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body[: self.at]
        raise httpx.ReadError("connection reset mid-body")


def test_a_body_broken_half_way_is_undone_and_retried(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 1000})
    storage.failures["a"] = [httpx.Response(200, stream=BreakingStream(data("a", 1000), 400))]
    updates: list[ProgressUpdate] = []
    result = downloader(storage, chunk_size=100).download([make_file("a", 1000)], progress=updates.append)
    assert result.files[0].path.read_bytes() == data("a", 1000)
    assert sum(u.advance for u in updates) == 1000 and any(u.advance < 0 for u in updates)


def test_a_crash_never_leaves_a_file_that_looks_complete(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 1000})
    storage.failures["a"] = [httpx.Response(200, stream=BreakingStream(data("a", 1000), 400)) for _ in range(10)]
    d = downloader(storage)
    with pytest.raises(TransportError, match="connection reset mid-body"):
        d.download([make_file("a", 1000)])
    assert list(d.staging_dir.iterdir()) == []


@pytest.mark.parametrize(
    "file_id",
    ["../../etc/passwd", "/abs/path", "..", "a\\b\\c", "con:nul", "x" * 500, "", "ünïcødé id", "a/../../b"],
)
def test_staged_names_never_escape_the_directory(tmp_path: Path, file_id: str) -> None:
    name = staged_name(make_file(file_id or "_", 1).model_copy(update={"id": file_id}))
    assert "/" not in name and "\\" not in name and not name.startswith(".") and len(name) < 120
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_staged_names_are_unique_per_action() -> None:
    common: dict[str, Any] = {"url": "u", "id": "x", "size": 1, "partition_values": {}, "timestamp": 1}
    names = {
        staged_name(File(url="u", id="a/b", size=1)),
        staged_name(File(url="u", id="a_b", size=1)),
        staged_name(AddFile(version=1, **common)),
        staged_name(AddFile(version=2, **common)),
        staged_name(CdfFile(version=1, **common)),
        staged_name(RemoveFile(version=1, **common)),
    }
    assert len(names) == 6


def test_repeated_actions_download_once(downloader: Callable[..., Downloader]) -> None:
    storage = Storage({"a": 10})
    f = make_file("a", 10)
    result = downloader(storage).download([f, f])
    assert len(storage.requests) == 1 and len(result.files) == 2 and result.stats.files == 1


# ---------------------------------------------------------------- refreshers over the client


def test_refresh_token_refresher_queries_again_with_the_token(make_client: Callable[..., SharingClient]) -> None:
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        n = len(bodies)
        return ndjson([protocol(), metadata(), file("a", url=f"https://b/a?gen={n}"), end(refreshToken=f"rt{n}")])

    client = make_client(handler)
    result = client.query("s.sc.t", predicate_hints=["x = 1"])
    refresher = refresher_for(client, result)
    assert isinstance(refresher, RefreshTokenRefresher)
    assert refresher.refresh()["a"].url == "https://b/a?gen=2"
    assert refresher.refresh()["a"].url == "https://b/a?gen=3"
    import json

    assert json.loads(bodies[1]) == {"predicateHints": ["x = 1"], "includeRefreshToken": True, "refreshToken": "rt1"}
    assert json.loads(bodies[2])["refreshToken"] == "rt2"  # the newest token is used


def test_requery_refresher_reissues_a_change_feed(make_client: Callable[..., SharingClient]) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return ndjson([protocol(), metadata(), file("c", kind="cdf", url=f"https://b/c?n={len(calls)}"), end()], version=1)

    client = make_client(handler)
    result = client.changes("s.sc.t", starting_version=1, ending_version=2)
    refresher = refresher_for(client, result)
    assert isinstance(refresher, RequeryRefresher)
    assert refresher.refresh()["c"].url == "https://b/c?n=2"
    assert calls[1].url.params == calls[0].url.params


def test_versioned_queries_refresh_by_requery(make_client: Callable[..., SharingClient]) -> None:
    client = make_client(lambda r: ndjson([protocol(), metadata(), file("a"), end()], version=3))
    assert isinstance(refresher_for(client, client.query("s.sc.t", version=3)), RequeryRefresher)


@pytest.mark.parametrize("options", [{}, {"version": 3}], ids=["refresh token", "requery"])
def test_refreshers_carry_each_answers_min_url_expiration(
    make_client: Callable[..., SharingClient], options: dict[str, Any]
) -> None:
    answers = iter(range(1, 10))

    def handler(request: httpx.Request) -> httpx.Response:
        n = next(answers)
        extra = {"refreshToken": f"rt{n}"} if not options else {}
        lines = [protocol(), metadata(), file("a"), end(minUrlExpirationTimestamp=n * 1000, **extra)]
        return ndjson(lines, version=options.get("version", 5))

    client = make_client(handler)
    refresher = refresher_for(client, client.query("s.sc.t", **options))
    assert refresher.min_url_expiration_ms == 1000
    refresher.refresh()
    assert refresher.min_url_expiration_ms == 2000
