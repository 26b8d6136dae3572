"""Deletion vectors of a batch: downloaded once, decoded, and turned into each file's row filter.

A change names its rows by deletion vectors (:class:`~sharesync.sync.protocol.changes.RowSelection`);
staging needs them as row positions. DV files (storage type ``p``) are downloaded before the data
files — once per DV file however many data files and versions use it, with URLs renewed like
data URLs — and every DV is decoded and checked (format, size, CRC-32, cardinality) before any
data file is fetched, so a broken DV fails the batch before anything is staged or written.
Inline DVs (``i``) need no download. A DV stored relative to the provider's table (``u``) names
a path in storage the recipient cannot reach: a clear error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.deletion_vectors import decode_deletion_vector
from sharesync.sync.delta.row_positions import NO_ROWS, ArrowData, RowPositions
from sharesync.sync.protocol.changes import ChangeFile, RowSelection
from sharesync.sync.protocol.download import Downloader, DownloadStats
from sharesync.sync.protocol.dvfiles import dv_file_key, dv_files, dv_identity
from sharesync.sync.protocol.refresh import UrlRefresher
from sharesync.sync.protocol.wire import DataFile


@dataclass(frozen=True)
class RowFilter:
    """A decoded :class:`RowSelection`: the rows in ``within`` (every row when None), minus ``without``."""

    within: RowPositions | None
    without: RowPositions

    def check(self, num_rows: int, what: str) -> None:
        """A DV marking a row past the end of the file belongs to another file."""
        for positions in (self.within, self.without):
            if positions is not None:
                positions.check_within(num_rows, what)

    def apply(self, data: ArrowData, first_row: int) -> ArrowData:
        """``data`` (rows ``first_row`` … of the file) reduced to the selected rows."""
        if self.within is None:
            return self.without.drop_from(data, first_row)
        return self.within.minus(self.without).keep_only(data, first_row)


class DeletionVectors:
    """The decoded DVs of one batch, by DV identity (one decode per DV, however often it is used)."""

    def __init__(self, decoded: Mapping[tuple[object, ...], RowPositions]) -> None:
        self._decoded = decoded

    def filter_for(self, change: ChangeFile) -> RowFilter | None:
        """The row filter of ``change``; None when it covers every row of its file."""
        selection = change.rows
        if selection.within is None and selection.without is None:
            return None
        within = self._rows(selection.within) if selection.within is not None else None
        without = self._rows(selection.without) if selection.without is not None else NO_ROWS
        return RowFilter(within, without)

    def _rows(self, file: DataFile) -> RowPositions:
        identity = dv_identity(file)
        return NO_ROWS if identity is None else self._decoded[identity]


def load_deletion_vectors(
    changes: Iterable[ChangeFile], downloader: Downloader, refresher: UrlRefresher | None
) -> tuple[DeletionVectors, DownloadStats | None]:
    """Download (once per DV file) and decode every DV the changes name; the DV downloads' stats."""
    files = {id(f): f for f in _selection_files(changes)}
    stored = dv_files(files.values())
    stats: DownloadStats | None = None
    contents: dict[str, bytes] = {}
    if stored:
        fetched = downloader.download(list(stored.values()), refresher=refresher)
        stats = fetched.stats
        for done in fetched.files:
            contents[done.file.id] = done.path.read_bytes()
            done.path.unlink(missing_ok=True)
    decoded: dict[tuple[object, ...], RowPositions] = {}
    for file in files.values():
        identity = dv_identity(file)
        if identity is not None and identity not in decoded:
            decoded[identity] = _decode(file, contents)
    return DeletionVectors(decoded), stats


def _selection_files(changes: Iterable[ChangeFile]) -> Iterable[DataFile]:
    for change in changes:
        selection: RowSelection = change.rows
        yield from (f for f in (selection.within, selection.without) if f is not None)


def _decode(file: DataFile, contents: Mapping[str, bytes]) -> RowPositions:
    dv = file.deletion_vector
    assert dv is not None
    if dv.storage_type == "u":
        raise ProtocolViolation(
            f"the deletion vector of file {file.id} is stored relative to the provider's table (storage type 'u'), "
            "which a recipient cannot reach; the sharing server must hand it out as a presigned URL (type 'p')"
        )
    key = dv_file_key(file)
    return decode_deletion_vector(dv, contents[key] if key is not None else None)
