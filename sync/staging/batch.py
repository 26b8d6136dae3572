"""Turn one batch's changes (or snapshot) response into a staged directory: prune, download, stage.

Everything between "the provider answered for versions 41..60" and "a directory of staged
parquet the Spark job reads": the batch's schema, the per-version file rule
(:mod:`sharesync.sync.protocol.changes`), pruning by the user's filter against partition values
and stats, parallel downloads that refresh expired URLs, and the rewrite into the staged layout
— done per file as soon as it arrives, while the other downloads continue. No Spark here.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Required, TypedDict, Unpack

import pyarrow as pa
import pyarrow.parquet as pq

from sharesync.sync.core.location import Location, Place, locate
from sharesync.sync.predicates import Expr, may_match
from sharesync.sync.protocol.budget import TransferBudget
from sharesync.sync.protocol.changes import ChangeFile, select_change_files, snapshot_files
from sharesync.sync.protocol.client import ChangesResult, QueryResult, SharingClient
from sharesync.sync.protocol.download import (
    DownloadedFile,
    Downloader,
    DownloadOptions,
    ProgressCallback,
    staged_name,
)
from sharesync.sync.protocol.refresh import refresher_for
from sharesync.sync.protocol.wire import (
    AddFile,
    CdfFile,
    DataFile,
    File,
    FileStats,
    Metadata,
    RemoveFile,
    StructType,
)
from sharesync.sync.staging.deletions import DeletionVectors, load_deletion_vectors
from sharesync.sync.staging.direct import DirectFiles
from sharesync.sync.staging.files import StageLayout, load_file, stage_file
from sharesync.sync.staging.netted import spelled_keys
from sharesync.sync.staging.netting import write_netted

log = logging.getLogger(__name__)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass
class StagedBatch:
    """A staged directory (local or in an object store) plus what it took to build it."""

    path: Location
    files: int = 0
    bytes: int = 0
    rows: int = 0
    url_refreshes: int = 0


def batch_dir(staging_root: Place, table_name: str, label: str) -> Location:
    """``<staging>/<table>/<label>``: one directory per table and batch, safe for any name."""
    return table_dir(staging_root, table_name).join(label)


def table_dir(staging_root: Place, table_name: str) -> Location:
    """``<staging>/<table>``: the directory of every batch of one table."""
    digest = hashlib.sha256(table_name.encode()).hexdigest()[:8]
    return locate(staging_root).join(f"{_UNSAFE.sub('_', table_name)}-{digest}")


def fresh_dir(path: Place) -> Location:
    """An empty directory at ``path`` (leftovers of a crashed attempt are removed first)."""
    return locate(path).make_empty()


def remove_batch(directory: Location) -> None:
    """Remove a batch's directory once it is applied (or failed). A failure to remove it is
    logged, not raised: it must not hide why the batch failed, and the next attempt's
    :func:`fresh_dir` clears it anyway."""
    try:
        directory.remove()
    except OSError as exc:
        log.warning("could not remove the staged batch %s: %s", directory, exc)


def batch_schema(result: ChangesResult, end_version: int) -> Metadata:
    """The metadata in force at ``end_version``: the newest historical metaData at or before it."""
    candidates = [m for m in result.historical_metadata if m.version is not None and m.version <= end_version]
    if candidates:
        return max(candidates, key=lambda m: m.version or 0)
    return result.metadata


def change_files(result: ChangesResult, end_version: int) -> list[ChangeFile]:
    """The batch's files per the protocol's per-version rule, none past ``end_version``.

    ``endingVersion`` is a hint to ``/query`` only (spec: Read Data from a Table); the client
    refuses a ``/changes`` answer with versions outside its range (:mod:`sharesync.sync.protocol.labels`),
    so the filter here is a second guard, not a way of reading such answers.
    """
    actions = [f for f in result.files if isinstance(f, AddFile | CdfFile | RemoveFile) and f.version <= end_version]
    return select_change_files(actions)


def prune(files: list[ChangeFile], expr: Expr | None, schema: StructType) -> tuple[list[ChangeFile], int]:
    """Drop files whose partition values or stats prove no row can match the filter."""
    if expr is None:
        return files, 0
    kept = [f for f in files if may_match(expr, _stats(f), f.file.partition_values, schema)]
    return kept, len(files) - len(kept)


def _stats(change: ChangeFile) -> FileStats | None:
    # Only snapshot and add files carry stats; cdf and remove files prune on partition values alone.
    # So do rows a deletion vector marks (a DV delete's): an add's stats may describe only the
    # rows it still holds (Delta's tightBounds), never those.
    if change.rows.within is not None or not isinstance(change.file, File | AddFile):
        return None
    return change.file.parsed_stats


class StageOptions(TypedDict, total=False):
    """The keyword arguments of :func:`stage` (only ``concurrency`` is required); see its docstring."""

    concurrency: Required[int]
    ca_bundle: Path | None
    progress: ProgressCallback | None
    downloader_factory: Callable[[Path], Downloader] | None  # tests: a downloader of their own
    snapshot: bool
    net_keys: Sequence[str] | None
    budget: TransferBudget | None
    direct: bool


def client_downloader(
    client: SharingClient,
    staging_dir: Path,
    *,
    concurrency: int,
    ca_bundle: Path | None,
    budget: TransferBudget | None = None,
) -> Downloader:
    """A downloader of ``client``'s files: its address policy, timeouts, provider name and file auth."""
    options = DownloadOptions(
        concurrency=concurrency,
        ca_bundle=ca_bundle,
        budget=budget,
        timeouts=client.timeouts,
        provider=client.provider,
        auth=client.file_auth,
    )
    return Downloader(staging_dir, policy=client.file_url_policy, options=options)


def stage(
    client: SharingClient,
    result: QueryResult | ChangesResult,
    files: list[ChangeFile],
    layout: StageLayout,
    directory: Place,
    **options: Unpack[StageOptions],
) -> StagedBatch:
    """Download ``files`` and stage each as it completes; returns the staged batch.

    ``directory`` may be in an object store (``staging_dir: s3://…``): the staged files are
    written there, for an engine that shares no disk with this process; downloads still land
    on the local disk first (a temporary directory), one file at a time.

    ``net_keys`` (a merge-mode batch of changes): keep the files in memory as they arrive and
    stage the batch as its net change per key (:mod:`sharesync.sync.staging.netting`) — one file instead of a
    file per provider file that the job would read back only to net it. Memory is bounded by
    the batch (``max_versions_per_batch``), as the netting itself is.

    ``snapshot``: the batch is a whole snapshot (a bootstrap). When it holds no file (an empty
    table, or a filter that prunes every file), one empty file with the layout's schema is
    staged, so the job still creates or replaces the target — as an empty table with the right
    columns — instead of leaving no table (or, in append mode, the previous log) behind.

    ``direct`` (the batch's only reader is the engine's :func:`read_staged`): a snapshot's files
    that fit the layout are kept as downloaded, for the engine to read (:mod:`sharesync.sync.staging.direct`).

    Deletion vectors are fetched and checked first (:mod:`sharesync.sync.staging.deletions`).
    ``budget`` (shared by the tables of a pass) bounds the downloads in flight and, for a batch
    netted in memory, reserves its files' bytes until the netted file is written.
    """
    budget, net_keys = options.get("budget"), options.get("net_keys")
    netted = budget is not None and net_keys is not None  # its files are held in memory until netted
    with budget.holding(sum(c.file.size for c in files)) if budget is not None and netted else nullcontext():
        return _stage(_Batch(client, result, files, layout, locate(directory)), options)


@dataclass(frozen=True)
class _Batch:
    """What is staged: the answer, its files, the layout and where they go."""

    client: SharingClient
    result: QueryResult | ChangesResult
    files: list[ChangeFile]
    layout: StageLayout
    where: Location


def _stage(batch: _Batch, options: StageOptions) -> StagedBatch:
    files, layout, net_keys = batch.files, batch.layout, options.get("net_keys")
    snapshot = options.get("snapshot", False)
    with _download_dir(batch.where) as raw:
        data = batch.where.join("data").make_empty()
        staged = StagedBatch(path=data)
        if not files:
            if snapshot:
                empty = data.join("empty.parquet")
                pq.write_table(layout.target.empty_table(), empty.path, filesystem=empty.filesystem)
            return staged
        factory = options.get("downloader_factory")
        if factory is not None:
            downloader = factory(raw)
        else:
            concurrency, ca_bundle, budget = options["concurrency"], options.get("ca_bundle"), options.get("budget")
            downloader = client_downloader(
                batch.client, raw, concurrency=concurrency, ca_bundle=ca_bundle, budget=budget
            )
        refresher = refresher_for(batch.client, batch.result)
        deletion_vectors, dv_stats = load_deletion_vectors(files, downloader, refresher)
        kept = DirectFiles(data, layout) if options.get("direct", False) and snapshot and net_keys is None else None
        sink = _Sink(files, layout, data, deletion_vectors, in_memory=net_keys is not None, direct=kept)
        progress = options.get("progress")
        outcome = downloader.download(sink.downloads, refresher=refresher, progress=progress, on_file=sink.on_file)
        if kept is not None:
            kept.finish()
        for stats in (outcome.stats, dv_stats):
            if stats is not None:
                staged.files += stats.files
                staged.bytes += stats.bytes
                staged.url_refreshes += stats.url_refreshes
        staged.rows = sum(sink.rows_per_file.values())
        if net_keys is not None:
            # File-name order, as the engine would read staged files: ties net the same every time.
            batch_table = pa.concat_tables([sink.tables.pop(n) for n in sorted(sink.tables)], promote_options="none")
            staged.rows = write_netted(batch_table, spelled_keys(layout.columns, net_keys), data).rows_before
            del batch_table
            pa.default_memory_pool().release_unused()  # give the batch's memory back before the engine runs
    return staged


@contextmanager
def _download_dir(where: Location) -> Iterator[Path]:
    """The local directory downloads land in, removed afterwards: ``<batch>/raw`` for a local
    staging directory, a temporary one when the staged files go to an object store."""
    if not where.is_local:
        with tempfile.TemporaryDirectory(prefix="sharesync-raw-") as temporary:
            yield Path(temporary)
        return
    raw = Path(where.path) / "raw"
    fresh_dir(raw)
    try:
        yield raw
    finally:
        shutil.rmtree(raw, ignore_errors=True)


class _Sink:
    """Stages each downloaded file as every change it carries, as soon as it arrives.

    A data file is downloaded once per batch, whichever versions name it: a file's ``id`` is the
    same in every request and version (protocol, "id"), and a table with deletion vectors names
    the same data file again in each version that changes its DV — removed and re-added, with
    another URL each time. Each change still reads only its own rows (its DVs' difference);
    usually a file carries one change.
    """

    def __init__(
        self,
        changes: list[ChangeFile],
        layout: StageLayout,
        data: Location,
        dvs: DeletionVectors,
        *,
        in_memory: bool,
        direct: DirectFiles | None = None,
    ) -> None:
        self.by_name: dict[str, list[ChangeFile]] = defaultdict(list)
        first: dict[tuple[bool, str], DataFile] = {}
        for change in changes:
            # cdf files are files of their own; add and remove actions name the table's data files
            shared = first.setdefault((isinstance(change.file, CdfFile), change.file.id), change.file)
            self.by_name[staged_name(shared)].append(change)
        self.downloads: list[DataFile] = list(first.values())
        self.layout, self.data, self.dvs, self.in_memory, self.direct = layout, data, dvs, in_memory, direct
        self.rows_per_file: dict[str, int] = {}
        self.tables: dict[str, pa.Table] = {}

    def on_file(self, done: DownloadedFile) -> None:
        changes = self.by_name[done.path.name]  # the downloader names each file staged_name(file)
        for index, change in enumerate(changes):
            name = done.path.name if len(changes) == 1 else f"{done.path.stem}-{index}.parquet"
            rows = self.dvs.filter_for(change)
            if self.direct is not None and rows is None and len(changes) == 1:
                taken = self.direct.take(done.path, name, change)
                if taken is not None:
                    self.rows_per_file[name] = taken
                    continue
            if self.in_memory:
                self.tables[name] = load_file(done.path, change, self.layout, rows)
            else:
                self.rows_per_file[name] = stage_file(done.path, self.data.join(name), change, self.layout, rows)
        done.path.unlink(missing_ok=True)  # keep disk use bounded by what is still in flight


def snapshot_change_files(result: QueryResult) -> list[ChangeFile]:
    return snapshot_files([f for f in result.files if isinstance(f, File)], result.version)
