"""What a provider's answer says it is, compared with what was asked for (pure).

Every answer of ``/query``, ``/changes`` and ``/metadata`` is labelled with a version: the
``Delta-Table-Version`` header, ``metaData.version``, each file's ``version``. sharesync files
rows and moves checkpoints by those labels, so a provider that answers one version and labels
it with another (one that ignores time travel and labels everything with its latest version,
say) would make it skip the versions in between and then call the table up to date. What a
correct provider may answer (spec "Read Data from a Table", "Read Change Data Feed from a
Table", "Query Table Metadata"; the reference server as the tie-breaker):

* ``version`` N (snapshot, metadata): the header is N; ``metaData.version`` and each file's
  ``version``, when sent, are N. (``/metadata``'s header was once documented as the current
  version: a ``metaData.version`` of N there is enough.)
* ``timestamp`` T: the version in force at T, which cannot be compared by equality; the
  labels must agree with each other, and a file's ``timestamp`` (the commit time of the
  version answered) must not be after T. Whether a later version was also committed by T
  needs another request and is not checked.
* ``startingVersion`` S (``/query``): the header is S (the reference server) or the first
  version with files (the spec's words); files and ``metaData`` lines are not before S.
  ``endingVersion`` there is a hint (spec), so later versions are allowed.
* ``/changes`` S..E: as ``startingVersion``, and nothing is after E (the range is inclusive);
  with timestamps for bounds, the files' commit times lie within them.
* the latest snapshot: only that it is not older than a version the caller already knows
  (:func:`check_not_older`).

Any mismatch is a :class:`VersionMismatch`, raised before anything of the answer is used.
"""

from __future__ import annotations

from collections.abc import Iterable

from sharesync.sync.core.errors import VersionMismatch
from sharesync.sync.core.timestamps import parse_timestamp, to_millis
from sharesync.sync.protocol.responses import FilesResult
from sharesync.sync.protocol.wire import ChangesRequest, DataFile, Metadata, QueryRequest

TIME_TRAVEL = (
    "the provider does not honour time travel; sync this table from the provider's latest version instead "
    "(no 'start' or backfill), and report it to the provider"
)
RANGE = (
    "the provider does not honour the version range asked for; run again, and report it to the provider if it persists"
)


def check_query(request: QueryRequest, answer: FilesResult, context: str) -> None:
    """Raise :class:`VersionMismatch` when a ``/query`` answer is labelled other than ``request`` asked."""
    if request.version is not None:
        _exactly(request.version, answer, context, f"a request of version {request.version}")
    elif request.timestamp is not None:
        asked = f"a request as of {request.timestamp}"
        _exactly(answer.version, answer, context, asked)
        moment = to_millis(parse_timestamp(request.timestamp))
        late = [stamp for f in answer.files if (stamp := _timestamp(f)) is not None and stamp > moment]
        if late:
            raise _mismatch(context, f"version {answer.version}, committed at {late[0]} ms (after)", asked, TIME_TRAVEL)
    elif request.starting_version is not None:
        _within(request.starting_version, None, answer, context)


def check_changes(request: ChangesRequest, answer: FilesResult, context: str) -> None:
    """Raise :class:`VersionMismatch` when a ``/changes`` answer strays outside the range asked for."""
    historical = bool(request.include_historical_metadata)
    if request.starting_version is not None:
        _within(request.starting_version, request.ending_version, answer, context, metadata=historical)
    elif request.ending_version is not None:
        _within(0, request.ending_version, answer, context, metadata=historical)
    bounds = (request.starting_timestamp, request.ending_timestamp)
    if bounds == (None, None):
        return
    low, high = (to_millis(parse_timestamp(b)) if b is not None else None for b in bounds)
    for f in answer.files:
        stamp = _timestamp(f)
        if stamp is not None and ((low is not None and stamp < low) or (high is not None and stamp > high)):
            asked = f"changes committed from {bounds[0] or 'the start'} to {bounds[1] or 'the latest'}"
            raise _mismatch(context, f"file {f.id} of version {_version(f)} committed at {stamp} ms", asked, RANGE)


def check_metadata(asked: int, answered: int, metadata: Metadata, context: str) -> None:
    """Raise :class:`VersionMismatch` when ``/metadata?version=asked`` answered another version."""
    label = metadata.version if metadata.version is not None else answered
    if label != asked:
        raise _mismatch(context, f"version {label}", f"a request of version {asked}", TIME_TRAVEL)


def check_not_older(answered: int, known: int, context: str) -> None:
    """A latest snapshot older than a version the provider already said it has is not the latest."""
    if answered < known:
        raise _mismatch(
            context,
            f"version {answered} as its latest",
            f"the latest snapshot, after it said version {known} was current",
            "the provider answered from an older copy of the table; run again, and report it to the provider if "
            "it persists",
        )


def _exactly(version: int, answer: FilesResult, context: str, asked: str) -> None:
    """Header, metaData and files all labelled ``version`` (what was asked, or what the header says)."""
    if answer.version != version:
        raise _mismatch(context, f"version {answer.version} (Delta-Table-Version header)", asked, TIME_TRAVEL)
    for metadata in _metadatas(answer):
        if metadata.version is not None and metadata.version != version:
            raise _mismatch(context, f"version {metadata.version} (metaData.version)", asked, TIME_TRAVEL)
    for f in answer.files:
        label = _version(f)
        if label is not None and label != version:
            raise _mismatch(context, f"file {f.id} of version {label}", asked, TIME_TRAVEL)


def _within(start: int, end: int | None, answer: FilesResult, context: str, *, metadata: bool = True) -> None:
    """Every label in ``start``..``end`` (None: no end), the header not after the first file.

    ``metadata``: whether ``metaData.version`` belongs to the range (a ``/changes`` answer without
    historical metadata labels its one metaData with the latest version, as the reference server does).
    """
    asked = f"a request of versions {start}..{'latest' if end is None else end}"

    def outside(version: int) -> bool:
        return version < start or (end is not None and version > end)

    versions = [v for f in answer.files if (v := _version(f)) is not None]
    if outside(answer.version) or (versions and answer.version > min(versions)):
        raise _mismatch(context, f"version {answer.version} (Delta-Table-Version header)", asked, RANGE)
    for f in answer.files:
        label = _version(f)
        if label is not None and outside(label):
            raise _mismatch(context, f"file {f.id} of version {label}", asked, RANGE)
    for m in _metadatas(answer) if metadata else ():
        if m.version is not None and outside(m.version):
            raise _mismatch(context, f"metaData of version {m.version}", asked, RANGE)


def _metadatas(answer: FilesResult) -> Iterable[Metadata]:
    yield answer.metadata
    yield from answer.historical_metadata


def _version(f: DataFile) -> int | None:
    version = getattr(f, "version", None)
    return version if isinstance(version, int) else None


def _timestamp(f: DataFile) -> int | None:
    stamp = getattr(f, "timestamp", None)
    return stamp if isinstance(stamp, int) else None


def _mismatch(context: str, answered: str, asked: str, advice: str) -> VersionMismatch:
    return VersionMismatch(f"{context}: the provider answered {answered} for {asked}; nothing was written — {advice}")
