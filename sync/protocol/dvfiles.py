"""Deletion-vector files of an answer: what to download once, and how to tell two DVs apart.

In delta-format answers a data file's deletion vector (DV) is inline (``i``) or in a DV file
behind a presigned URL (``p``: the reference server rewrites every on-disk DV to one,
``DeltaSharedTableKernel.getResponseAddFile``). One DV file may hold the DVs of many data
files, and change feeds list the same DV again in later versions, so DV files are keyed by the
answer's ``deletionVectorFileId`` (spec "File in Delta Format": the same DV file keeps its id
across requests) and downloaded once per key. Their URLs expire like data URLs; the key is what
a refresh matches them by, as data files are matched by ``id``. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sharesync.sync.protocol.wire import DataFile

# Keys of DV files start with this, so one URL book can hold data files and DV files alike.
_PREFIX = "dv:"
_HEADER = 1  # format-version byte at the start of every DV file
_FRAME = 8  # each DV in a file: 4-byte big-endian size before it, CRC-32 after it


@dataclass(frozen=True)
class DeletionVectorFile:
    """A DV file to download: like a data file, but its size is unknown (it may hold more DVs)."""

    id: str  # the key (see :func:`dv_file_key`)
    url: str = field(repr=False)
    expiration_timestamp: int | None
    min_size: int  # bytes the DVs this answer reads from it need; a shorter body was cut off
    size: None = None


Downloadable = DataFile | DeletionVectorFile


def dv_file_key(file: DataFile) -> str | None:
    """The key of ``file``'s DV file; None when its DV is not in a presigned file (or it has none)."""
    dv = file.deletion_vector
    if dv is None or dv.storage_type != "p":
        return None
    # Without an id the URL minus its (signed, expiring) query string names the object.
    return _PREFIX + (file.deletion_vector_file_id or dv.path_or_inline_dv.split("?", 1)[0])


def dv_files(files: Iterable[DataFile]) -> dict[str, DeletionVectorFile]:
    """One entry per DV file the given data files' DVs are stored in."""
    found: dict[str, DeletionVectorFile] = {}
    for file in files:
        key, dv = dv_file_key(file), file.deletion_vector
        if key is None or dv is None:
            continue
        needed = (_HEADER if dv.offset is None else dv.offset) + dv.size_in_bytes + _FRAME
        known = found.get(key)
        earlier = known.expiration_timestamp if known is not None else None
        expiries = [t for t in (file.expiration_timestamp, earlier) if t is not None]
        found[key] = DeletionVectorFile(
            id=key,
            url=dv.path_or_inline_dv,
            expiration_timestamp=min(expiries) if expiries else None,
            min_size=max(needed, known.min_size if known else 0),
        )
    return found


def downloadables(files: Iterable[DataFile]) -> dict[str, Downloadable]:
    """The data files and DV files of an answer by key: what a URL refresh hands out anew."""
    listed = list(files)
    return {**{f.id: f for f in listed}, **dv_files(listed)}


def dv_identity(file: DataFile) -> tuple[object, ...] | None:
    """What tells two DVs of one data file apart (Delta's ``uniqueId``, minus the URL's signature)."""
    dv = file.deletion_vector
    if dv is None:
        return None
    where = dv_file_key(file) or f"{dv.storage_type}{dv.path_or_inline_dv}"
    return (where, dv.offset, dv.size_in_bytes, dv.cardinality)
