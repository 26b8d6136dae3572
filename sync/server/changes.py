"""Version-range answers: ``/changes`` (change data feed) and ``/query`` with ``startingVersion``.

Per version, ``/changes`` serves the version's ``cdc`` files as ``cdf`` lines when it has any,
else its data-changing ``add``/``remove`` files (reference ``DeltaSharingCDCReader``: "If there
are CDC actions, we read them exclusively"); a ``startingVersion`` query serves the
data-changing ``add``/``remove`` files of every version. Each line carries its version and
commit timestamp. Pages are cut after ``maxFiles`` file lines; the page token remembers the
version and the position inside it, plus the range and latest version of the first page, so
later pages ignore commits made meanwhile (as the reference server does).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sharesync.sync.protocol.wire import WireModel
from sharesync.sync.server.answers import Answer, Context, change_line, metadata_line, protocol_line
from sharesync.sync.server.deltalog import Commit, FileEntry
from sharesync.sync.server.history import (
    check_changes_available,
    ensure_positive,
    served_change_files,
    snapshot_at,
    version_at,
    version_at_or_after,
)
from sharesync.sync.server.problems import cdf_disabled, invalid
from sharesync.sync.server.signing import checksum
from sharesync.sync.server.snapshots import QueryRequest

CHANGES_PAGE_TOKEN = "changes-page"
QUERY_CHANGES_PAGE_TOKEN = "query-changes-page"


@dataclass(frozen=True)
class ChangesParams:
    """Query parameters of ``/changes`` as sent (strings), validated by :func:`answer_changes`."""

    starting_version: str | None = None
    starting_timestamp: str | None = None
    ending_version: str | None = None
    ending_timestamp: str | None = None
    include_historical_metadata: bool = False
    max_files: str | None = None
    page_token: str | None = None

    def checksum(self) -> str:
        return checksum(
            {
                "sv": self.starting_version,
                "st": self.starting_timestamp,
                "ev": self.ending_version,
                "et": self.ending_timestamp,
                "hm": self.include_historical_metadata,
            }
        )


def _number(name: str, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise invalid(f"{name} is not a valid number.") from None


def _start_after_latest(start: int, latest: int) -> Exception:
    return invalid(
        f"Provided Start version({start}) for reading change data is invalid. "
        f"Start version cannot be greater than the latest version of the table({latest})."
    )


def _not_recorded(version: int, start: int, end: int) -> Exception:
    return invalid(
        f"Error getting change data for range [{start} , {end}] as change data was not recorded for version [{version}]"
    )


def _resolve_range(ctx: Context, params: ChangesParams, latest: int) -> tuple[int, int]:
    """Start and end versions from version or timestamp arguments (reference CDF option rules)."""
    for position in ("starting", "ending"):
        if getattr(params, f"{position}_version") is not None and getattr(params, f"{position}_timestamp") is not None:
            raise invalid(
                f"Multiple {position} arguments provided for CDF read. Please provide one of either "
                f"{position}Timestamp or {position}Version."
            )
    start = _number("startingVersion", params.starting_version)
    if start is None and params.starting_timestamp is not None:
        start = version_at_or_after(ctx.log, ctx.table, params.starting_timestamp, "startingTimestamp")
    if start is None:
        raise invalid("No startingVersion or startingTimestamp provided for CDF read.")
    ensure_positive("startingVersion", start)
    if start > latest:
        raise _start_after_latest(start, latest)
    end = _number("endingVersion", params.ending_version)
    if end is None and params.ending_timestamp is not None:
        end = version_at(ctx.log, ctx.table, params.ending_timestamp, "endingTimestamp")
    end = latest if end is None else min(end, latest)
    if end < start:
        raise invalid(f"CDF range from start {start} to end {end} was invalid. End cannot be before start.")
    return start, end


def _cdf_lines(commit: Commit) -> list[tuple[str, FileEntry]]:
    files = served_change_files(commit)
    if commit.cdcs:
        return [("cdf", f) for f in files]
    adds = {id(f) for f in commit.adds}
    return [("add" if id(f) in adds else "remove", f) for f in files]


def _data_change_lines(commit: Commit) -> list[tuple[str, FileEntry]]:
    return [("add", f) for f in commit.adds if f.data_change] + [("remove", f) for f in commit.removes if f.data_change]


Lines = dict[int, tuple[Commit, list[tuple[str, FileEntry]]]]


def _paged_lines(
    ctx: Context,
    start: int,
    end: int,
    first_index: int,
    page_size: int | None,
    lines_of: Lines,
    metadata_from: int | None,
) -> Iterator[WireModel | tuple[int, int]]:
    """File (and historical metadata) lines of ``[start, end]``; yields ``(version, index)`` where a page ends."""
    stamps = ctx.log.timestamps()
    served = 0
    for version in range(start, end + 1):
        commit, entries = lines_of[version]
        skip = first_index if version == start else 0
        # A metadata line belongs to the page holding the version's first file line.
        meta = commit.metadata if metadata_from is not None and version > metadata_from and skip == 0 else None
        if page_size is not None and served == page_size and (meta is not None or len(entries) > skip):
            yield (version, skip)
            return
        if meta is not None:
            yield metadata_line(meta, version=version)
        for index in range(skip, len(entries)):
            if page_size is not None and served == page_size:
                yield (version, index)
                return
            kind, entry = entries[index]
            yield change_line(ctx, kind, entry, version, stamps[version])
            served += 1


def _collect(
    ctx: Context, lines: Iterator[WireModel | tuple[int, int]], token_kind: str, page: dict[str, int], sum_: str
) -> tuple[list[WireModel], str | None]:
    actions: list[WireModel] = []
    next_token = None
    for item in lines:
        if isinstance(item, tuple):
            version, index = item
            next_token = ctx.issue_token(token_kind, {**page, "sv": version, "i": index, "c": sum_})
        else:
            actions.append(item)
    return actions, next_token


def answer_changes(ctx: Context, params: ChangesParams) -> Answer:
    """``GET …/changes``: the change data feed of a version range."""
    latest_snapshot = snapshot_at(ctx.log, ctx.table, None, check_files=False)
    if not latest_snapshot.metadata.cdf_enabled:
        raise cdf_disabled(ctx.table.full_name)
    page_size = ctx.page_size(_number("maxFiles", params.max_files))
    sum_ = params.checksum()
    page = ctx.read_page_token(CHANGES_PAGE_TOKEN, params.page_token, sum_) if params.page_token else None

    latest = int(page["lv"]) if page else latest_snapshot.version
    start, end = _resolve_range(ctx, params, latest)
    if page:
        start, end = int(page["sv"]), int(page["ev"])
    first = int(page["fs"]) if page else start

    commits = check_changes_available(ctx.log, ctx.table, start, end)
    head = snapshot_at(ctx.log, ctx.table, first if params.include_historical_metadata else latest, check_files=False)
    if not snapshot_at(ctx.log, ctx.table, start, check_files=False).metadata.cdf_enabled:
        raise _not_recorded(start, start, end)
    lines_of: Lines = {}
    for commit in commits:
        if commit.metadata is not None and not commit.metadata.cdf_enabled:
            raise _not_recorded(commit.version, start, end)
        lines_of[commit.version] = (commit, _cdf_lines(commit))

    actions: list[WireModel] = [
        protocol_line(head.min_reader_version, ctx.table),
        metadata_line(head.metadata, version=head.version),
    ]
    metadata_from = first if params.include_historical_metadata else None
    body, next_token = _collect(
        ctx,
        _paged_lines(ctx, start, end, int(page["i"]) if page else 0, page_size, lines_of, metadata_from),
        CHANGES_PAGE_TOKEN,
        {"ev": end, "lv": latest, "fs": first},
        sum_,
    )
    actions += body
    if ctx.include_end_stream or page_size is not None:
        actions.append(ctx.end_stream(next_page_token=next_token))
    return Answer(first, actions)


def answer_query_changes(ctx: Context, request: QueryRequest) -> Answer:
    """``POST …/query`` with ``startingVersion``: data-changing files since that version."""
    assert request.starting_version is not None
    page_size = ctx.page_size(request.max_files)
    sum_ = request.checksum()
    page = ctx.read_page_token(QUERY_CHANGES_PAGE_TOKEN, request.page_token, sum_) if request.page_token else None
    latest = int(page["lv"]) if page else ctx.log.latest_version()
    first = request.starting_version
    if first > latest:
        raise _start_after_latest(first, latest)
    if request.ending_version is not None and request.ending_version > latest:
        raise invalid(
            f"Provided End version({request.ending_version}) for reading change data is invalid. "
            f"End version cannot be greater than the latest version of the table({latest})."
        )
    start = int(page["sv"]) if page else first
    end = (
        int(page["ev"])
        if page
        else min(request.ending_version if request.ending_version is not None else latest, latest)
    )

    commits = check_changes_available(ctx.log, ctx.table, start, end)
    head = snapshot_at(ctx.log, ctx.table, first, check_files=False)
    lines_of: Lines = {c.version: (c, _data_change_lines(c)) for c in commits}
    actions: list[WireModel] = [
        protocol_line(head.min_reader_version, ctx.table),
        metadata_line(head.metadata, version=first),
    ]
    body, next_token = _collect(
        ctx,
        _paged_lines(ctx, start, end, int(page["i"]) if page else 0, page_size, lines_of, metadata_from=first),
        QUERY_CHANGES_PAGE_TOKEN,
        {"ev": end, "lv": latest},
        sum_,
    )
    actions += body
    if ctx.include_end_stream or page_size is not None:
        actions.append(ctx.end_stream(next_page_token=next_token))
    return Answer(first, actions)
