"""Version-range answers: ``/changes`` (change data feed) and ``/query`` with ``startingVersion``.

Per version, ``/changes`` serves the version's ``cdc`` files as ``cdf`` lines when it has any,
else its data-changing ``add``/``remove`` files (reference ``DeltaSharingCDCReader``: "If there
are CDC actions, we read them exclusively"); a ``startingVersion`` query serves the
data-changing ``add``/``remove`` files of every version, in the order the commit wrote them (the
reference server keeps the log's order; the spec lets a client ignore it). Each line carries its version and
commit timestamp. Pages are cut after ``maxFiles`` file lines; the page token remembers the
version and the position inside it, plus the range and latest version of the first page, so
later pages ignore commits made meanwhile (as the reference server does). Historical protocol
lines (``includeHistoricalProtocol``) exist only in the delta format, like historical metadata
they sit with the first file line of their version.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sharesync.sync.server.answers import Answer, Context, change_line, lazily, metadata_line, protocol_line
from sharesync.sync.server.logmodel import Commit, FileEntry, JsonObject, TableMetadata, TableProtocol
from sharesync.sync.server.problems import cdf_disabled, invalid
from sharesync.sync.server.servable_versions import (
    check_changes_available,
    data_change_actions,
    ensure_positive,
    snapshot_at,
    version_at,
    version_at_or_after,
)
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
    include_historical_protocol: bool = False
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
                "hp": self.include_historical_protocol,
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
    if commit.cdcs:
        return [("cdf", f) for f in commit.cdcs]
    return list(data_change_actions(commit))


Lines = dict[int, tuple[Commit, list[tuple[str, FileEntry]]]]


@dataclass(frozen=True)
class _Window:
    """Which versions' metadata and protocol actions are inlined (after ``*_from``; None: none)."""

    metadata_from: int | None
    protocol_from: int | None

    def extras(self, ctx: Context, commit: Commit) -> list[JsonObject]:
        version, lines = commit.version, []
        if self.protocol_from is not None and version > self.protocol_from and commit.protocol is not None:
            lines.append(protocol_line(ctx, commit.protocol, version=version))
        if self.metadata_from is not None and version > self.metadata_from and commit.metadata is not None:
            lines.append(metadata_line(ctx, commit.metadata, version=version))
        return lines


def _paged_lines(
    ctx: Context, start: int, end: int, first_index: int, page_size: int | None, lines_of: Lines, window: _Window
) -> Iterator[JsonObject | tuple[int, int]]:
    """File (and historical metadata) lines of ``[start, end]``; yields ``(version, index)`` where a page ends."""
    stamps = ctx.log.timestamps()
    served = 0
    for version in range(start, end + 1):
        commit, entries = lines_of[version]
        skip = first_index if version == start else 0
        # Metadata and protocol lines belong to the page holding the version's first file line.
        extras = window.extras(ctx, commit) if skip == 0 else []
        if page_size is not None and served == page_size and (extras or len(entries) > skip):
            yield (version, skip)
            return
        yield from extras
        for index in range(skip, len(entries)):
            if page_size is not None and served == page_size:
                yield (version, index)
                return
            kind, entry = entries[index]
            yield change_line(ctx, kind, entry, version, stamps[version])
            served += 1


def _body(
    ctx: Context,
    lines: Iterator[JsonObject | tuple[int, int]],
    token_kind: str,
    page: dict[str, int],
    sum_: str,
    ends: bool,
) -> Iterator[JsonObject]:
    """The file lines, then endStreamAction with the next page's token (known once the page is cut)."""
    next_token = None
    for item in lines:
        if isinstance(item, tuple):
            version, index = item
            next_token = ctx.issue_token(token_kind, {**page, "sv": version, "i": index, "c": sum_})
        else:
            yield item
    if ends:
        yield ctx.end_stream(next_page_token=next_token)


def _negotiate(ctx: Context, protocol: TableProtocol, head: TableMetadata, lines_of: Lines) -> None:
    """One format for the whole range: every metadata in it and every file it serves must fit."""
    metadatas = [head] + [c.metadata for c, _ in lines_of.values() if c.metadata is not None]
    files = [entry for _, entries in lines_of.values() for _, entry in entries]
    ctx.negotiate(protocol, metadatas, files)


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

    commits = check_changes_available(ctx.log, ctx.table, start, end, verify_files=ctx.verify_files)
    head = snapshot_at(ctx.log, ctx.table, first if params.include_historical_metadata else latest, check_files=False)
    if not snapshot_at(ctx.log, ctx.table, start, check_files=False).metadata.cdf_enabled:
        raise _not_recorded(start, start, end)
    lines_of: Lines = {}
    for commit in commits:
        if commit.metadata is not None and not commit.metadata.cdf_enabled:
            raise _not_recorded(commit.version, start, end)
        lines_of[commit.version] = (commit, _cdf_lines(commit))
    _negotiate(ctx, head.protocol, head.metadata, lines_of)

    historical_protocol = params.include_historical_protocol and ctx.delta
    window = _Window(first if params.include_historical_metadata else None, first if historical_protocol else None)
    # Spec "Metadata": ``version`` is "returned when querying table data with a version or timestamp
    # parameter, or cdf query with includeHistoricalMetadata set to true" (the reference stamps it always).
    lines = [
        protocol_line(ctx, head.protocol, version=head.version if historical_protocol else None),
        metadata_line(ctx, head.metadata, version=head.version if params.include_historical_metadata else None),
    ]
    body = _body(
        ctx,
        _paged_lines(ctx, start, end, int(page["i"]) if page else 0, page_size, lines_of, window),
        CHANGES_PAGE_TOKEN,
        {"ev": end, "lv": latest, "fs": first},
        sum_,
        ends=ctx.include_end_stream or page_size is not None,
    )
    return Answer(first, lazily(lines, body), ctx.response_format)


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

    commits = check_changes_available(ctx.log, ctx.table, start, end, verify_files=ctx.verify_files)
    head = snapshot_at(ctx.log, ctx.table, first, check_files=False)
    lines_of: Lines = {c.version: (c, list(data_change_actions(c))) for c in commits}
    _negotiate(ctx, head.protocol, head.metadata, lines_of)
    historical_protocol = bool(request.include_historical_protocol) and ctx.delta
    lines = [
        protocol_line(ctx, head.protocol, version=first if historical_protocol else None),
        metadata_line(ctx, head.metadata, version=first),
    ]
    body = _body(
        ctx,
        _paged_lines(
            ctx,
            start,
            end,
            int(page["i"]) if page else 0,
            page_size,
            lines_of,
            _Window(first, first if historical_protocol else None),
        ),
        QUERY_CHANGES_PAGE_TOKEN,
        {"ev": end, "lv": latest},
        sum_,
        ends=ctx.include_end_stream or page_size is not None,
    )
    return Answer(first, lazily(lines, body), ctx.response_format)
