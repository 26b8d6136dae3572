"""``/metadata`` and snapshot ``/query`` answers (latest, ``version``, ``timestamp``, refresh tokens).

Pagination follows the reference server: a page token pins the snapshot version of the first
page and the position in that snapshot's file list, and is valid only for the same query
parameters (checksum). A refresh token pins the version of a latest-snapshot query so the same
files can be re-issued with fresh URLs after they expire.
"""

from __future__ import annotations

from collections.abc import Iterator

from sharesync.sync.protocol import wire
from sharesync.sync.server.answers import Answer, Context, file_line, lazily, metadata_line, protocol_line
from sharesync.sync.server.file_skipping import apply_limit_hint, logical_names, prune_by_json_predicate
from sharesync.sync.server.logmodel import FileEntry, JsonObject, Snapshot
from sharesync.sync.server.problems import history_not_shared, invalid
from sharesync.sync.server.servable_versions import ensure_positive, snapshot_at, version_as_of
from sharesync.sync.server.signing import SignatureError, checksum

PAGE_TOKEN = "query-page"
REFRESH_TOKEN = "refresh"


class QueryRequest(wire.QueryRequest):
    """The ``/query`` body as the server validates it (the model itself is shared with the client)."""

    include_historical_protocol: bool | None = None

    def checksum(self) -> str:
        return checksum(
            self.model_dump(
                exclude={"max_files", "page_token", "include_refresh_token", "refresh_token"}, exclude_none=True
            )
        )

    def validate_versions(self, ctx: Context, cdf_enabled: bool) -> None:
        """The reference server's checks, in its order and words."""
        given = [n for n in ("version", "timestamp", "starting_version") if getattr(self, n) is not None]
        if len(given) > 1:
            raise invalid("Only one of version, timestamp, startingVersion can be set.")
        ensure_positive("table version", self.version)
        ensure_positive("startingVersion", self.starting_version)
        if given and self.include_refresh_token:
            raise invalid("includeRefreshToken cannot be used when querying a specific version.")
        if self.page_token is not None and self.include_refresh_token:
            raise invalid("includeRefreshToken must be used in the first page request.")
        if given and self.refresh_token is not None:
            raise invalid("refreshToken cannot be used when querying a specific version.")
        if self.page_token is not None and self.refresh_token is not None:
            raise invalid("refreshToken must be used in the first page request.")
        if given and not cdf_enabled:
            raise history_not_shared(ctx.table.full_name)
        if (
            self.starting_version is not None
            and self.ending_version is not None
            and self.starting_version > self.ending_version
        ):
            raise invalid(
                f"startingVersion({self.starting_version}) must be smaller than or equal to "
                f"endingVersion({self.ending_version})."
            )


def answer_metadata(ctx: Context, version: str | None = None, timestamp: str | None = None) -> Answer:
    """Protocol and metadata of the latest version, or of ``version`` / ``timestamp`` (newer
    reference servers accept those for the Spark connector's ``versionAsOf``)."""
    target: int | None = None
    if version is not None or timestamp is not None:
        if not snapshot_at(ctx.log, ctx.table, None, check_files=False).metadata.cdf_enabled:
            raise history_not_shared(ctx.table.full_name)
        if version is not None and timestamp is not None:
            raise invalid("Only one of version, timestamp can be set.")
        if version is not None:
            if not version.isdigit():
                raise invalid("version is not a valid number.")
            target = int(version)
        else:
            target = version_as_of(ctx.log, ctx.table, timestamp or "")
    snap = snapshot_at(ctx.log, ctx.table, target, check_files=False)
    ctx.negotiate(snap.protocol, [snap.metadata])
    lines = [
        protocol_line(ctx, snap.protocol),
        metadata_line(ctx, snap.metadata, version=target, snapshot=snap),
    ]
    if ctx.include_end_stream:
        lines.append(ctx.end_stream())
    return Answer(snap.version, lines, ctx.response_format)


def _refresh_version(ctx: Context, token: str) -> int:
    try:
        payload = ctx.signer.decode_token(REFRESH_TOKEN, token, ctx.now_ms)
    except SignatureError as exc:
        if exc.expired:
            raise invalid("The refresh token has expired. Please restart the query.") from None
        raise invalid(f"Error decoding refresh token: {token}.") from None
    if payload.get("t") != ctx.table.id:
        raise invalid("The table specified in the refresh token does not match the table being queried.")
    return int(payload["v"])


def answer_snapshot_query(ctx: Context, request: QueryRequest) -> Answer:
    """Files of one snapshot, pruned by the hints, one page at a time."""
    page_size = ctx.page_size(request.max_files)
    sum_ = request.checksum()
    page = ctx.read_page_token(PAGE_TOKEN, request.page_token, sum_) if request.page_token else None
    refresh_version = _refresh_version(ctx, request.refresh_token) if request.refresh_token else None

    is_version_query = request.version is not None or request.timestamp is not None
    # Precedence as in the reference server: page token, explicit version/timestamp, refresh token.
    if page is not None:
        target: int | None = int(page["v"])
    elif request.version is not None:
        target = request.version
    elif request.timestamp is not None:
        target = version_as_of(ctx.log, ctx.table, request.timestamp)
    else:
        target = refresh_version
    # Time travel reads old files: check they survived VACUUM (the latest snapshot's are live).
    snap = snapshot_at(ctx.log, ctx.table, target, check_files=target is not None and ctx.verify_files)

    hints = request.json_predicate_hints
    names = logical_names(snap.metadata) if hints else None  # the schema is parsed only to prune
    selected = apply_limit_hint(
        prune_by_json_predicate(snap.files, hints, snap.metadata.partition_columns, names), request.limit_hint
    )
    start = int(page["i"]) if page is not None else 0
    stop = len(selected) if page_size is None else min(len(selected), start + page_size)
    ctx.negotiate(snap.protocol, [snap.metadata], selected[start:stop])
    head = [
        protocol_line(ctx, snap.protocol),
        metadata_line(ctx, snap.metadata, version=snap.version if is_version_query else None, snapshot=snap),
    ]
    next_token = None
    if stop < len(selected):
        next_token = ctx.issue_token(PAGE_TOKEN, {"v": snap.version, "i": stop, "c": sum_})
    # The reference server adds endStreamAction for maxFiles / includeRefreshToken even without
    # the capability (older clients asked for those fields and read the token from it).
    ends = ctx.include_end_stream or page_size is not None or bool(request.include_refresh_token)
    refresh = None
    if request.include_refresh_token and not is_version_query and request.starting_version is None:
        refresh = ctx.issue_token(REFRESH_TOKEN, {"v": snap.version})
    body = _files(ctx, snap, selected[start:stop], is_version_query)
    tail = _end(ctx, next_token, refresh) if ends else iter(())
    return Answer(snap.version, lazily(head, body, tail), ctx.response_format)


def _files(ctx: Context, snap: Snapshot, files: list[FileEntry], is_version_query: bool) -> Iterator[JsonObject]:
    version, timestamp = (snap.version, snap.timestamp) if is_version_query else (None, None)
    for entry in files:
        yield file_line(ctx, entry, version=version, timestamp=timestamp)


def _end(ctx: Context, next_token: str | None, refresh: str | None) -> Iterator[JsonObject]:
    """After the files: ``minUrlExpirationTimestamp`` is known only once they are signed."""
    yield ctx.end_stream(next_page_token=next_token, refresh_token=refresh)
