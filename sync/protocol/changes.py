"""Turn the files of a changes (or snapshot) response into change rows to stage — pure.

The protocol's rule (spec: "Read Change Data Feed from a Table"): a version that has
``cdf`` files describes its changes there, each row carrying its own ``_change_type``;
a version without them (an append, or a table without CDF) describes them by its data
files: rows of an ``add`` are inserts, rows of a ``remove`` are deletes. A server may
send a version's add/remove files alongside its cdf files; those must then be ignored,
or every updated row would also count as deleted and re-inserted.

Deletion vectors (DVs) refine the rule, as Delta's own change reader does
(``CDCReader.getDeletedAndAddedRows``). A logical file is its data file minus the rows its DV
marks, so an ``add`` inserts and a ``remove`` deletes only the rows outside its DV. A ``remove``
and an ``add`` of the *same* data file in one version (matched by file id; the URLs differ) only
changed the DV: rows in the new DV and not the old one were deleted, rows in the old DV and not
the new one came back. Those rows — never the whole file — are the version's changes. Add and
remove actions with ``dataChange: false`` (compaction, DV purges) change no rows and are
skipped; cdc actions always carry ``dataChange: false`` and are the version's changes.

The spec lets a server send the lines in any order, so versions are sorted here, never trusted
to arrive in order. What the rule cannot survive is refused before anything is staged
(:func:`check_change_feed`): the same file action twice (its rows would be applied twice) and
versions before the range asked for (their changes are already in the target).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from sharesync.sync.core.changefeed import ChangeType
from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.dvfiles import dv_identity
from sharesync.sync.protocol.wire import AddFile, CdfFile, DataFile, File, RemoveFile


@dataclass(frozen=True)
class RowSelection:
    """Which rows of a data file a change covers, named by deletion vectors (decoded when staging):
    the rows ``within``'s DV marks (every row when None), minus the rows ``without``'s DV marks."""

    within: DataFile | None = None
    without: DataFile | None = None


EVERY_ROW = RowSelection()


@dataclass(frozen=True)
class ChangeFile:
    """One provider file to download and stage, with the change metadata its rows get."""

    file: DataFile
    # None: the file's rows carry their own ``_change_type`` column (a cdf file).
    change_type: ChangeType | None
    commit_version: int
    commit_timestamp_ms: int | None
    rows: RowSelection = EVERY_ROW

    @property
    def id(self) -> str:
        return self.file.id


def check_change_feed(files: Iterable[DataFile], start: int | None, context: str) -> None:
    """Raise :class:`ProtocolViolation` when a change feed repeats a file action or lists a version
    before ``start`` (None: the start was a timestamp, so only repeats are checked)."""
    seen: set[tuple[str, int | None, str]] = set()
    for f in files:
        version = getattr(f, "version", None)
        if start is not None and version is not None and version < start:
            raise ProtocolViolation(
                f"{context}: the provider listed file {f.id} of version {version}, before the first version asked "
                f"for ({start}); nothing was applied — run again, and report it to the provider if it persists"
            )
        key = (type(f).__name__, version, f.id)
        if key in seen:
            raise ProtocolViolation(
                f"{context}: the provider listed the same {_KINDS[type(f)]} action of file {f.id} (version {version}) "
                "twice, so its rows would be applied twice; nothing was applied — run again, and report it to the "
                "provider if it persists"
            )
        seen.add(key)


_KINDS: dict[type[DataFile], str] = {File: "file", AddFile: "add", CdfFile: "cdf", RemoveFile: "remove"}


def select_change_files(actions: Iterable[AddFile | CdfFile | RemoveFile]) -> list[ChangeFile]:
    """Apply the per-version rule and return the files to stage, in version order."""
    by_version: dict[int, list[AddFile | CdfFile | RemoveFile]] = defaultdict(list)
    for action in actions:
        # ``dataChange`` sorts add/remove actions; a cdc action is change data by definition and
        # Delta writes it with ``dataChange: false`` (delta response format, as logged).
        if isinstance(action, CdfFile) or action.data_change:
            by_version[action.version].append(action)
    selected: list[ChangeFile] = []
    for version in sorted(by_version):
        files = by_version[version]
        cdf = [f for f in files if isinstance(f, CdfFile)]
        if cdf:
            selected.extend(ChangeFile(f, None, version, f.timestamp) for f in cdf)
        else:
            selected.extend(_data_changes(files, version))
    return selected


def _data_changes(files: list[AddFile | CdfFile | RemoveFile], version: int) -> Iterator[ChangeFile]:
    removed = {f.id: f for f in files if isinstance(f, RemoveFile)}
    added = {f.id for f in files if isinstance(f, AddFile)}
    for f in files:
        if isinstance(f, AddFile):
            old = removed.get(f.id)
            if old is None:
                yield ChangeFile(f, ChangeType.INSERT, version, f.timestamp, _outside_own_dv(f))
            else:
                yield from _dv_changes(old, f, version)
        elif isinstance(f, RemoveFile) and f.id not in added:
            yield ChangeFile(f, ChangeType.DELETE, version, f.timestamp, _outside_own_dv(f))


def _dv_changes(old: RemoveFile, new: AddFile, version: int) -> Iterator[ChangeFile]:
    """The same data file removed and added again: only the rows whose DV membership changed.

    Both changes read the added file's data (one download): it is the same data file.
    """
    if dv_identity(old) == dv_identity(new):
        return  # the same logical file re-committed (e.g. new statistics): no row changed
    if new.deletion_vector is not None:
        deleted = RowSelection(within=new, without=old if old.deletion_vector is not None else None)
        yield ChangeFile(new, ChangeType.DELETE, version, new.timestamp, deleted)
    if old.deletion_vector is not None:
        restored = RowSelection(within=old, without=new if new.deletion_vector is not None else None)
        yield ChangeFile(new, ChangeType.INSERT, version, new.timestamp, restored)


def _outside_own_dv(file: DataFile) -> RowSelection:
    return RowSelection(without=file) if file.deletion_vector is not None else EVERY_ROW


def snapshot_files(files: Iterable[File], version: int) -> list[ChangeFile]:
    """A snapshot's files staged as inserts at the snapshot version (bootstrap rows)."""
    return [ChangeFile(f, ChangeType.INSERT, version, f.timestamp, _outside_own_dv(f)) for f in files]
