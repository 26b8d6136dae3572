"""Parallel, size-checked downloads of presigned file URLs, renewed when they expire.

Downloads run concurrently (asyncio, bounded), stream to ``<name>.part`` in the staging directory
in chunks, check the byte count against the declared ``size`` (stopping early past it) and are
renamed into place only when complete, so a crash never leaves a half file looking whole. Every
URL, and every redirect, must pass the provider's :class:`~sharesync.sync.protocol.addresses.FileUrlPolicy`
first (no fetching of loopback or metadata addresses on a provider's say-so), and every download
must end within its deadline (:meth:`~sharesync.sync.protocol.transport.Timeouts.download_deadline`)
and arrive faster than the rate floor (:mod:`~sharesync.sync.protocol.pace`), so a server dripping
one byte at a time cannot hold a run for ever. A URL
about to expire, or one the storage refuses (403), is renewed through the
:class:`~sharesync.sync.protocol.refresh.UrlBook`. Transient failures are retried like API calls.
Deletion-vector files download the same way; their size is unknown (one may hold DVs of files
this answer does not list), so a body is only checked to reach the last DV the answer reads.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from sharesync.sync.core.errors import DownloadError, SharesyncError, TransportError, UnsafeUrl, UrlExpired
from sharesync.sync.core.redact import install_log_redaction
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.budget import TransferBudget
from sharesync.sync.protocol.checked_connect import (
    AddressRefused,
    CheckedBackend,
    Resolver,
    checked_transport,
    proxied,
    system_resolver,
)
from sharesync.sync.protocol.dvfiles import DeletionVectorFile, Downloadable
from sharesync.sync.protocol.http_errors import aread_error, translate_httpx_errors
from sharesync.sync.protocol.pace import async_floor_hook
from sharesync.sync.protocol.refresh import UrlBook, UrlRefresher
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.tls import ssl_context
from sharesync.sync.protocol.transport import USER_AGENT, Timeouts
from sharesync.sync.protocol.wire import AddFile, CdfFile, File, RemoveFile

CHUNK_SIZE = 1024 * 1024
# A body of unknown size (a DV file) larger than this is not a DV file.
MAX_UNSIZED_BYTES = 256 * 1024 * 1024
_KIND: dict[type[Downloadable], str] = {
    File: "file",
    AddFile: "add",
    CdfFile: "cdf",
    RemoveFile: "remove",
    DeletionVectorFile: "dv",
}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class DownloadedFile:
    file: Downloadable
    path: Path


@dataclass
class DownloadStats:
    files: int = 0
    bytes: int = 0
    url_refreshes: int = 0
    retries: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class DownloadResult:
    files: list[DownloadedFile]  # in the order of the input
    stats: DownloadStats


@dataclass(frozen=True)
class ProgressUpdate:
    """Sent as bytes arrive; ``advance`` is negative when a broken file starts over."""

    file_id: str
    advance: int
    files_done: int
    files_total: int


ProgressCallback = Callable[[ProgressUpdate], None]
FileHook = Callable[[DownloadedFile], None]


def staged_name(file: Downloadable) -> str:
    """A file name for ``file`` that cannot leave its directory, unique per action.

    The id comes from the server: only ``[A-Za-z0-9_-]`` of it is kept (no dots, so no ``..``;
    no separators), and a hash of the full identity keeps two ids that clean up alike apart.
    """
    kind = _KIND[type(file)]
    version = getattr(file, "version", None)
    digest = hashlib.sha256(f"{kind}\0{version}\0{file.id}".encode()).hexdigest()[:16]
    stem = _UNSAFE.sub("_", file.id).strip("_-")[:64] or "file"
    at = f"-v{version}" if version is not None else ""
    return f"{kind}{at}-{stem}-{digest}.parquet"


# ---------------------------------------------------------------- the downloader


@dataclass
class _Job:
    file: Downloadable
    path: Path
    context: str
    inputs: list[int] = field(default_factory=list)


# A URL is renewed when it expires within a minute, or within a quarter of its lifetime when that is
# shorter; a file whose URL keeps expiring is renewed at most three times.
REFRESH_MARGIN_SECONDS = 60.0
REFRESH_FRACTION = 0.25
MAX_REFRESHES_PER_FILE = 3
HOOK_WORKERS = 4  # threads running on_file (staging) while the next files download


@dataclass(frozen=True, kw_only=True)
class DownloadOptions:
    """How a :class:`Downloader` fetches; every field has the default a pass uses unless told."""

    concurrency: int = 8
    retry: RetryPolicy | None = None  # None: RetryPolicy.from_env()
    timeouts: Timeouts | None = None  # None: Timeouts.from_env()
    ca_bundle: Path | None = None
    budget: TransferBudget | None = None  # shared with the other tables of a pass: bounds their downloads together
    provider: str | None = None  # named by the rate floor's error, so the user knows which provider to configure
    # GCS directory access: a bearer token for the store's origin (never sent on a redirect away).
    auth: httpx.Auth | None = None
    # Seams for tests: the HTTP transport, how file hosts' names resolve, the clock URLs expire by, the chunk size.
    transport: httpx.AsyncBaseTransport | None = None
    resolver: Resolver = system_resolver
    clock: Callable[[], float] = time.time
    chunk_size: int = CHUNK_SIZE


class Downloader:
    """Downloads data files into a staging directory: parallel, size-checked, refreshing URLs."""

    def __init__(self, staging_dir: Path, *, policy: FileUrlPolicy, options: DownloadOptions | None = None) -> None:
        options = options or DownloadOptions()
        if options.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        install_log_redaction()  # httpx logs each URL, signature included, unless redacted
        self.staging_dir = Path(staging_dir)
        self.policy = policy
        self.options = options
        self.concurrency = options.concurrency
        self.retry = options.retry or RetryPolicy.from_env()
        self.timeouts = options.timeouts or Timeouts.from_env()
        provider = options.provider
        # The rate floor (the same as the provider's API answers'); its error names the provider to configure.
        subject = f"the file storage of provider {provider}" if provider else "the file storage"
        self.bounds = self.timeouts.bounds(subject, provider)

    def download(
        self,
        files: Sequence[Downloadable],
        *,
        refresher: UrlRefresher | None = None,
        progress: ProgressCallback | None = None,
        on_file: FileHook | None = None,
    ) -> DownloadResult:
        """Blocking form of :meth:`download_async` (runs its own event loop)."""
        return asyncio.run(self.download_async(files, refresher=refresher, progress=progress, on_file=on_file))

    async def download_async(
        self,
        files: Sequence[Downloadable],
        *,
        refresher: UrlRefresher | None = None,
        progress: ProgressCallback | None = None,
        on_file: FileHook | None = None,
    ) -> DownloadResult:
        """Download every file; ``on_file`` runs in a worker thread as each one completes.

        The first failure cancels the rest and is raised; finished files stay in place.
        """
        started = time.monotonic()
        self.staging_dir.mkdir(parents=True, exist_ok=True)
        jobs = self._jobs(files)
        stats = DownloadStats()
        book = UrlBook(files, refresher, self.options.clock)
        run = _Run(self, book, stats, len(jobs), progress, on_file)
        verify, limits = ssl_context(self.options.ca_bundle), httpx.Limits(max_connections=self.concurrency)
        transport = self.options.transport
        if transport is None and not proxied():  # connect only to addresses the policy allows
            transport = checked_transport(verify, limits, CheckedBackend(self.policy, self.options.resolver))
        async with httpx.AsyncClient(
            verify=verify,
            timeout=self.timeouts.to_httpx(),
            transport=transport,
            auth=self.options.auth,
            follow_redirects=True,
            # Files are stored compressed already; a body the server compresses anyway is decoded
            # and still stopped at its declared size (no decompression bomb fills the disk).
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
            limits=limits,
            event_hooks={"request": [self._check_redirect], "response": [async_floor_hook(self.bounds)]},
        ) as http:
            with ThreadPoolExecutor(max_workers=HOOK_WORKERS, thread_name_prefix="sharesync-hook") as pool:
                tasks = [asyncio.create_task(run.job(http, job, pool)) for job in jobs]
                try:
                    await asyncio.gather(*tasks)
                except BaseException:
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
        stats.url_refreshes = book.refreshes
        stats.seconds = time.monotonic() - started
        results: list[DownloadedFile | None] = [None] * len(files)
        for job in jobs:
            for index in job.inputs:
                results[index] = DownloadedFile(files[index], job.path)
        return DownloadResult([r for r in results if r is not None], stats)

    async def _check_redirect(self, request: httpx.Request) -> None:
        # Runs for every request the client sends, redirects included (the first is checked with
        # its file's name in :meth:`_Run._fetch`, before it is sent).
        self.policy.check(request.url, context="a file download (or a redirect of one)")

    def _jobs(self, files: Sequence[Downloadable]) -> list[_Job]:
        root = self.staging_dir.resolve()
        jobs: dict[str, _Job] = {}
        for index, file in enumerate(files):
            name = staged_name(file)
            path = root / name
            if path.parent != root:  # pragma: no cover - staged_name cannot produce separators
                raise DownloadError(f"file id {file.id!r} would leave the staging directory")
            what = f"file {file.id} ({file.size} bytes)" if file.size is not None else f"deletion vector file {file.id}"
            job = jobs.setdefault(name, _Job(file, path, f"download {what}"))
            job.inputs.append(index)
        return list(jobs.values())


class _Run:
    """State shared by the downloads of one call."""

    def __init__(
        self,
        downloader: Downloader,
        book: UrlBook,
        stats: DownloadStats,
        total: int,
        progress: ProgressCallback | None,
        on_file: FileHook | None,
    ) -> None:
        self.d = downloader
        self.book = book
        self.stats = stats
        self.total = total
        self.progress = progress
        self.on_file = on_file
        self.slots = asyncio.Semaphore(downloader.concurrency)

    async def job(self, http: httpx.AsyncClient, job: _Job, pool: ThreadPoolExecutor) -> None:
        shared = self.d.options.budget
        budget = shared.download_slot() if shared is not None else nullcontext()
        async with self.slots, budget:
            await self._download(http, job)
        if self.on_file is not None:  # outside the slot: staging overlaps the next downloads
            await asyncio.get_running_loop().run_in_executor(pool, self.on_file, DownloadedFile(job.file, job.path))

    async def _download(self, http: httpx.AsyncClient, job: _Job) -> None:
        budget = self.d.retry.budget(job.context)
        refreshes = 0
        while True:
            entry = self.book.current(job.file.id)
            try:
                if self.book.expiring(entry, REFRESH_MARGIN_SECONDS, REFRESH_FRACTION):
                    entry = await self.book.refresh(job.file.id, entry)
                await self._fetch(http, entry.url, job)
                return
            except UrlExpired as exc:
                if not self.book.can_refresh:
                    raise UrlExpired(f"{exc.message}; no way to renew the URL was given") from None
                if refreshes >= MAX_REFRESHES_PER_FILE:
                    raise
                refreshes += 1
                await self.book.refresh(job.file.id, entry)
            except SharesyncError as exc:
                await budget.failed_async(exc)
                self.stats.retries += 1

    async def _fetch(self, http: httpx.AsyncClient, url: str, job: _Job) -> None:
        size = job.file.size
        limit = size if size is not None else MAX_UNSIZED_BYTES
        part = job.path.with_name(job.path.name + ".part")
        written = 0
        self.d.policy.check(url, context=job.context)
        deadline = self.d.timeouts.download_deadline(limit)
        try:
            async with _within(deadline, job.context):
                with translate_httpx_errors(job.context):
                    async with http.stream("GET", url) as response:
                        if not response.is_success:
                            raise _refused(await aread_error(response, context=job.context))
                        # Buffered writes to the local staging disk: shorter than a thread hop would be.
                        with open(part, "wb") as out:  # noqa: ASYNC230
                            async for chunk in response.aiter_bytes(self.d.options.chunk_size):
                                written += len(chunk)
                                if written > limit:  # a size cap: never store more than was declared
                                    raise DownloadError(
                                        f"{job.context}: the body is longer than the declared size; stopped"
                                    )
                                out.write(chunk)
                                self._report(job, len(chunk))
            _check_length(job, written)
            os.replace(part, job.path)
        except AddressRefused as exc:  # by the connection pool, which knows no file
            part.unlink(missing_ok=True)
            raise UnsafeUrl(f"{job.context}: {exc.message}") from None
        except BaseException:
            part.unlink(missing_ok=True)
            if written:
                self._report(job, -min(written, limit))
            raise
        self.stats.files += 1
        self.stats.bytes += written
        self._report(job, 0)

    def _report(self, job: _Job, advance: int) -> None:
        if self.progress is not None:
            self.progress(ProgressUpdate(job.file.id, advance, self.stats.files, self.total))


@asynccontextmanager
async def _within(seconds: float, context: str) -> AsyncIterator[None]:
    """Cancel the download when it outlasts ``seconds`` as a whole: httpx's read timeout bounds each
    read, so a server sending one byte per read timeout would otherwise never be cut off."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError:
        raise TransportError(
            f"{context}: not complete after {seconds:.3g} s; the storage is stalled or far too slow (the bound "
            "is SHARESYNC_HTTP_DEADLINE_SECONDS, default 600, plus the file's size at 256 KiB/s)"
        ) from None


def _check_length(job: _Job, written: int) -> None:
    file = job.file
    if file.size is not None and written != file.size:
        raise DownloadError(f"{job.context}: received {written} bytes, the server declared {file.size}")
    if isinstance(file, DeletionVectorFile) and written < file.min_size:
        raise DownloadError(
            f"{job.context}: received {written} bytes, but its deletion vectors reach byte {file.min_size}"
        )


def _refused(error: SharesyncError) -> SharesyncError:
    """Storage refusing a presigned URL or a token: 403 (S3, Azure), 401 (GCS: a bearer token
    expired or revoked before its ``expirationTime``), or 400 saying it expired (GCS signed URLs)."""
    status = getattr(error, "status", 0)
    if status in (401, 403) or (status == 400 and "expire" in error.message.lower()):
        return UrlExpired(f"{error.message} (the presigned URL expired or was refused)")
    return error
