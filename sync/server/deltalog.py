"""Replay a Delta table's transaction log straight from disk.

The sharing server needs more than a snapshot reader gives: the actions of each version
(``add``/``remove``/``cdc`` with their commit timestamps) for ``/changes`` and
``startingVersion`` queries, snapshots at any version still reconstructable, and the earliest
version the log can still serve after log cleanup. So the log is read directly: JSON commits
(``NNN.json``), parquet checkpoints (``NNN.checkpoint[.i.n].parquet``, read with pyarrow) and
``_last_checkpoint`` is not needed (the directory listing says the same).

Commit timestamps are the commit's ``inCommitTimestamp`` or ``commitInfo.timestamp`` (what
``deltalake``'s change data feed reports as ``_commit_timestamp``), else the commit file's
modification time, made strictly increasing the way Delta's history manager does.
Parsed commits are immutable and cached; snapshots are cached and rolled forward.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote

import pyarrow.parquet as pq

from sharesync.sync.server.deletionvectors import DeletionVectorError
from sharesync.sync.server.logmodel import (
    Commit,
    FileEntry,
    LogError,
    ReplayState,
    Snapshot,
    TableProtocol,
    VersionUnavailable,
    monotonize,
    parse_commit,
    parse_entry,
    parse_metadata,
    parse_protocol,
)

__all__ = ["LOG_DIR", "DeltaLog", "LogError", "VersionUnavailable"]

LOG_DIR = "_delta_log"
_SNAPSHOT_CACHE = 8
_T = TypeVar("_T")


@dataclass
class _Listing:
    commits: dict[int, os.stat_result] = field(default_factory=dict)
    checkpoints: dict[int, list[Path]] = field(default_factory=dict)

    @property
    def latest(self) -> int:
        versions = list(self.commits) + list(self.checkpoints)
        if not versions:
            raise LogError("the table has no commits")
        return max(versions)

    def contiguous_start(self) -> int:
        """First version of the unbroken run of JSON commits that ends at the latest one."""
        version = self.latest
        while version - 1 in self.commits:
            version -= 1
        return version if version in self.commits else version + 1


def _mtime_ms(stat: os.stat_result) -> int:
    return stat.st_mtime_ns // 1_000_000


_FileStamp = tuple[int, int, int] | None


def _stamp(stat: os.stat_result) -> _FileStamp:
    """Which file this is: a rewritten or re-created log file differs in inode, mtime or size."""
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _version_stamp(listing: _Listing, version: int) -> _FileStamp:
    """The identity of the log file that defines ``version``: its commit, else its checkpoint."""
    stat = listing.commits.get(version)
    if stat is not None:
        return _stamp(stat)
    parts = listing.checkpoints.get(version)
    return _stamp(parts[0].stat()) if parts else None


def read_checkpoint(parts: list[Path], version: int) -> ReplayState:
    """Active files, metadata and protocol from a (possibly multi-part) parquet checkpoint."""
    state = ReplayState(version, None, TableProtocol(), {})
    for part in parts:
        names = set(pq.read_schema(part).names)
        columns = [c for c in ("add", "metaData", "protocol") if c in names]
        for row in pq.read_table(part, columns=columns).to_pylist():
            if row.get("add"):
                entry = parse_entry(row["add"])
                state.files[entry.path] = entry
            elif row.get("metaData"):
                state.metadata = parse_metadata(row["metaData"])
            elif row.get("protocol"):
                state.protocol = parse_protocol(row["protocol"])
    return state


# ---------------------------------------------------------------- the log of one table


class DeltaLog:
    """Cached, thread-safe access to one table's log; every call sees the log as it is now."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._log_dir = self.path / LOG_DIR
        self._lock = threading.RLock()
        # Every cache entry remembers the identity of the log file it came from: a table dropped
        # and re-created under the same path reuses version numbers with other contents.
        self._commits: dict[int, tuple[_FileStamp, Commit]] = {}
        self._snapshots: OrderedDict[int, tuple[_FileStamp, Snapshot]] = OrderedDict()
        self._states: OrderedDict[int, tuple[_FileStamp, ReplayState]] = OrderedDict()

    # -- listing

    def _list(self) -> _Listing:
        listing = _Listing()
        try:
            entries = list(os.scandir(self._log_dir))
        except FileNotFoundError:
            raise LogError(f"{self.path} has no {LOG_DIR} directory") from None
        for entry in entries:
            name = entry.name
            stem = name.split(".", 1)[0]
            if not stem.isdigit():
                continue
            if name.endswith(".json") and name.count(".") == 1:
                listing.commits[int(stem)] = entry.stat()
            elif ".checkpoint." in name and name.endswith(".parquet"):
                listing.checkpoints.setdefault(int(stem), []).append(Path(entry.path))
        for parts in listing.checkpoints.values():
            parts.sort()
        return listing

    def latest_version(self) -> int:
        return self._list().latest

    def earliest_version(self) -> int:
        """The earliest version whose snapshot can still be reconstructed."""
        return self._earliest_snapshot(self._list())

    def earliest_change_version(self) -> int:
        """The earliest version whose own commit (its actions) is still in the log."""
        return self._list().contiguous_start()

    @staticmethod
    def _earliest_snapshot(listing: _Listing) -> int:
        start = listing.contiguous_start()
        if start == 0:
            return 0
        usable = [c for c in listing.checkpoints if c >= start - 1]
        return min(usable) if usable else listing.latest

    # -- commits

    def commit(self, version: int) -> Commit:
        """The parsed actions of ``version`` (raw timestamp; see :meth:`timestamps`)."""
        listing = self._list()
        stat = listing.commits.get(version)
        if stat is None:
            raise VersionUnavailable(version, listing.contiguous_start(), listing.latest)
        return self._commit(version, stat)

    def commits(self, start: int, end: int) -> list[Commit]:
        """The commits ``start..end`` (one directory listing for the whole range)."""
        listing = self._list()
        missing = next((v for v in range(start, end + 1) if v not in listing.commits), None)
        if missing is not None:
            raise VersionUnavailable(missing, listing.contiguous_start(), listing.latest)
        return [self._commit(v, listing.commits[v]) for v in range(start, end + 1)]

    def _commit(self, version: int, stat: os.stat_result) -> Commit:
        with self._lock:
            cached = self._commits.get(version)
            if cached is not None and cached[0] == _stamp(stat):
                return cached[1]
        text = (self._log_dir / f"{version:020d}.json").read_text(encoding="utf-8")
        parsed = parse_commit(version, text.splitlines(), _mtime_ms(stat))
        with self._lock:
            self._commits[version] = (_stamp(stat), parsed)
        return parsed

    def timestamps(self) -> dict[int, int]:
        """Commit timestamp (ms) of every version still in the log, strictly increasing."""
        listing = self._list()
        raw = {v: self._commit(v, stat).timestamp for v, stat in listing.commits.items()}
        for version, parts in listing.checkpoints.items():
            if version not in raw:  # commit cleaned up: the checkpoint's own mtime is all we have
                raw[version] = _mtime_ms(parts[0].stat())
        return monotonize(raw)

    # -- snapshots

    def snapshot(self, version: int | None = None) -> Snapshot:
        """The table at ``version`` (latest when None); VersionUnavailable when not reconstructable."""
        listing = self._list()
        latest = listing.latest
        target = latest if version is None else version
        earliest = self._earliest_snapshot(listing)
        if target < earliest or target > latest:
            raise VersionUnavailable(target, earliest, latest)
        stamp = _version_stamp(listing, target)
        with self._lock:
            cached = self._snapshots.get(target)
            if cached is not None and cached[0] == stamp:
                self._snapshots.move_to_end(target)
                return cached[1]
        state = self._base_state(listing, target)
        for v in range(state.version + 1, target + 1):
            stat = listing.commits.get(v)
            if stat is None:
                raise VersionUnavailable(target, earliest, latest)
            state.apply(self._commit(v, stat))
        stamps = self.timestamps()
        snap = state.freeze(stamps.get(target, 0))
        with self._lock:
            self._remember(self._states, target, (stamp, state.copy()))
            self._remember(self._snapshots, target, (stamp, snap))
        return snap

    def _base_state(self, listing: _Listing, target: int) -> ReplayState:
        """The closest known state at or before ``target``: cached, checkpoint, or empty."""
        with self._lock:
            cached = {
                v: state
                for v, (stamp, state) in self._states.items()
                if v <= target and stamp == _version_stamp(listing, v)
            }
        checkpoints = [c for c in listing.checkpoints if c <= target and c >= listing.contiguous_start() - 1]
        best_checkpoint = max(checkpoints) if checkpoints else None
        if cached and (best_checkpoint is None or max(cached) >= best_checkpoint):
            return cached[max(cached)].copy()
        if best_checkpoint is not None:
            return read_checkpoint(listing.checkpoints[best_checkpoint], best_checkpoint)
        return ReplayState(-1, None, TableProtocol(), {})

    @staticmethod
    def _remember(cache: OrderedDict[int, _T], key: int, value: _T) -> None:
        cache[key] = value
        cache.move_to_end(key)
        while len(cache) > _SNAPSHOT_CACHE:
            cache.popitem(last=False)

    # -- files on disk

    def file_path(self, log_path: str) -> Path:
        """The file on disk behind a log path; absolute or escaping paths are refused."""
        relative = unquote(log_path)  # log paths are URI-encoded (Delta protocol, "Add File")
        if "://" in relative or os.path.isabs(relative):
            raise LogError("a table containing absolute paths cannot be shared")
        normalized = os.path.normpath(relative)  # lexical: cheap enough to run for every file served
        if normalized == ".." or normalized.startswith("../"):
            raise LogError(f"file path {log_path!r} points outside the table")
        return self.path / normalized

    def files_exist(self, entries: tuple[FileEntry, ...] | list[FileEntry]) -> bool:
        """True when every file, and every deletion-vector file, is still on disk (VACUUM deletes
        the files of old versions)."""
        return all(os.path.isfile(self.file_path(p)) for e in entries for p in (e.path, *_dv_paths(e)))


def _dv_paths(entry: FileEntry) -> tuple[str, ...]:
    dv = entry.deletion_vector
    if dv is None or dv.storage_type != "u":
        return ()
    try:
        return (dv.relative_path(),)
    except DeletionVectorError as exc:
        raise LogError(f"file {entry.path} has an unreadable deletion vector: {exc}") from None
