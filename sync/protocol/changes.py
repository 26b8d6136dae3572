"""Turn the files of a changes (or snapshot) response into change rows to stage — pure.

The protocol's rule (spec: "Read Change Data Feed from a Table"): a version that has
``cdf`` files describes its changes there, each row carrying its own ``_change_type``;
a version without them (an append, or a table without CDF) describes them by its data
files: rows of an ``add`` are inserts, rows of a ``remove`` are deletes. A server may
send a version's add/remove files alongside its cdf files; those must then be ignored,
or every updated row would also count as deleted and re-inserted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sharesync.sync.core.changefeed import ChangeType
from sharesync.sync.protocol.wire import AddFile, CdfFile, DataFile, File, RemoveFile


@dataclass(frozen=True)
class ChangeFile:
    """One provider file to download and stage, with the change metadata its rows get."""

    file: DataFile
    # None: the file's rows carry their own ``_change_type`` column (a cdf file).
    change_type: ChangeType | None
    commit_version: int
    commit_timestamp_ms: int | None

    @property
    def id(self) -> str:
        return self.file.id


def select_change_files(actions: Iterable[AddFile | CdfFile | RemoveFile]) -> list[ChangeFile]:
    """Apply the per-version rule and return the files to stage, in version order."""
    by_version: dict[int, list[AddFile | CdfFile | RemoveFile]] = defaultdict(list)
    for action in actions:
        by_version[action.version].append(action)
    selected: list[ChangeFile] = []
    for version in sorted(by_version):
        files = by_version[version]
        cdf = [f for f in files if isinstance(f, CdfFile)]
        if cdf:
            selected.extend(ChangeFile(f, None, version, f.timestamp) for f in cdf)
            continue
        for f in files:
            kind = ChangeType.INSERT if isinstance(f, AddFile) else ChangeType.DELETE
            selected.append(ChangeFile(f, kind, version, f.timestamp))
    return selected


def snapshot_files(files: Iterable[File], version: int) -> list[ChangeFile]:
    """A snapshot's files staged as inserts at the snapshot version (bootstrap rows)."""
    return [ChangeFile(f, ChangeType.INSERT, version, f.timestamp) for f in files]
