"""Streamed NDJSON responses: lines → actions → one page.

Query, changes and metadata answer with one JSON action per line, in the parquet or the delta
response format (Delta Sharing protocol, "API Response Actions in Parquet/Delta Format"). Nothing
here holds a whole body: bytes are split into lines as they arrive, each line is validated by
:func:`sharesync.sync.protocol.wire.parse_action` (parquet) or
:func:`sharesync.sync.protocol.deltaformat.parse_delta_action` (delta), and a :class:`Page`
enforces the grammar — ``protocol`` and ``metaData`` first, then files, ``endStreamAction`` last
— and refuses a table whose Delta reader features sharesync cannot read before any of its files
is handed out. :mod:`sharesync.sync.protocol.streams` strings pages together.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator

from sharesync.sync.core.errors import ProtocolViolation, StreamError, TruncatedStream, UnsupportedTableFeature
from sharesync.sync.delta.features import check_reader_features, table_reader_features
from sharesync.sync.delta.type_widening import check_type_changes
from sharesync.sync.protocol.wire import (
    Action,
    AddFile,
    CdfFile,
    DataFile,
    EndStreamAction,
    File,
    Metadata,
    Protocol,
    RemoveFile,
    parse_action,
)

logger = logging.getLogger(__name__)

# One line holds one action; even a wide schema string is far below this.
MAX_LINE_BYTES = 64 * 1024 * 1024
# The reader protocol version of parquet answers (spec "Protocol": currently always 1).
READER_VERSION = 1
PARQUET, DELTA = "parquet", "delta"

LineParser = Callable[[bytes], Action | None]

SNAPSHOT_FILES: tuple[type[DataFile], ...] = (File,)
CHANGE_FILES: tuple[type[DataFile], ...] = (AddFile, CdfFile, RemoveFile)
ANY_FILES: tuple[type[DataFile], ...] = (File, AddFile, CdfFile, RemoveFile)

_KIND = {Protocol: "protocol", Metadata: "metaData", File: "file", AddFile: "add", CdfFile: "cdf", RemoveFile: "remove"}


class PageCursor:
    """Pagination state machine: START → (token)* → DONE.

    Spec: "the nextPageToken field may be an empty string or missing when there are no
    additional results" — both end the listing. A token seen before (the last one, or any
    earlier one: A→B→A…) would loop forever, so it is a protocol violation.
    """

    def __init__(self, context: str) -> None:
        self.context = context
        self.token: str | None = None
        self.done = False
        self.pages = 0
        self._seen: set[str] = set()

    def advance(self, next_token: str | None) -> None:
        self.pages += 1
        if not next_token:
            self.done = True
        elif next_token in self._seen:
            raise ProtocolViolation(f"{self.context}: the server returned a nextPageToken it had returned before")
        else:
            self._seen.add(next_token)
            self.token = next_token


def split_lines(
    chunks: Iterable[bytes], *, context: str, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[bytes, bool]]:
    """``(line, terminated)`` pairs; ``terminated`` is False for a last line without ``\\n``."""
    buffer = bytearray()
    for chunk in chunks:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            buffer += chunk[start:end]
            yield bytes(buffer), True
            buffer.clear()
            start = end + 1
        buffer += chunk[start:]
        if len(buffer) > max_line_bytes:
            raise ProtocolViolation(f"{context}: a response line is longer than {max_line_bytes} bytes")
    if buffer:
        yield bytes(buffer), False


def parse_lines(chunks: Iterable[bytes], *, context: str, parse: LineParser = parse_action) -> Iterator[Action]:
    """Actions from raw body chunks; an unparsable unterminated last line means the body was cut.

    A line holding only actions this client does not know is skipped (forward compatibility).
    """
    for raw, terminated in split_lines(chunks, context=context):
        line = raw.strip()
        if not line:
            continue
        try:
            action = parse(line)
        except ProtocolViolation as exc:
            if not terminated:
                raise TruncatedStream(f"{context}: the response stopped in the middle of a line") from None
            raise ProtocolViolation(f"{context}: {exc.message}") from None
        if action is None:
            unknown = ", ".join(repr(key) for key in json.loads(line))
            logger.debug("%s: skipped a line with an action this sharesync does not know (%s)", context, unknown)
            continue
        yield action


class Page:
    """One NDJSON response: header actions read at once, the rest streamed by :meth:`body`."""

    def __init__(
        self,
        actions: Iterator[Action],
        *,
        context: str,
        end_expected: bool,
        allowed: tuple[type[DataFile], ...],
        response_format: str = PARQUET,
        table: str = "",
    ) -> None:
        self._actions = actions
        self.context = context
        self.end_expected = end_expected
        self.allowed = allowed
        self.response_format = response_format
        self.table = table or context
        self.end: EndStreamAction | None = None
        self.protocol, self.metadata = self._read_header()

    def _read_header(self) -> tuple[Protocol, Metadata]:
        protocol: Protocol | None = None
        metadata: Metadata | None = None
        while protocol is None or metadata is None:
            action = next(self._actions, None)
            if action is None:
                raise TruncatedStream(f"{self.context}: the response ended before its protocol and metaData lines")
            if isinstance(action, Protocol) and protocol is None:
                protocol = action
            elif isinstance(action, Metadata) and metadata is None:
                metadata = action
            elif isinstance(action, EndStreamAction):
                self._check_end(action)
                raise ProtocolViolation(f"{self.context}: endStreamAction came before the protocol and metaData lines")
            else:
                raise ProtocolViolation(
                    f"{self.context}: expected protocol and metaData first, got {_KIND.get(type(action), 'another')} line"
                )
        if self.response_format == DELTA:
            self.check_protocol(protocol, metadata)
        elif protocol.min_reader_version > READER_VERSION:
            raise ProtocolViolation(
                f"{self.context}: the table needs reader version {protocol.min_reader_version}; this sharesync reads "
                f"version {READER_VERSION}: upgrade sharesync"
            )
        return protocol, metadata

    def check_protocol(self, protocol: Protocol, metadata: Metadata | None = None) -> None:
        """A delta-format protocol: every reader feature it demands, and every type change its schema
        records, must be one sharesync reads."""
        try:
            check_reader_features(protocol.min_reader_version, protocol.reader_features, table=self.table)
        except UnsupportedTableFeature as exc:
            if protocol.version is None:
                raise
            raise UnsupportedTableFeature(f"{exc.message} (from version {protocol.version})") from None
        features = table_reader_features(protocol.min_reader_version, protocol.reader_features)
        if metadata is not None:
            check_type_changes(metadata.table_schema.model_dump(mode="json"), table=self.table)
        if metadata is not None and metadata.column_mapping_mode != "none" and "columnMapping" not in features:
            raise ProtocolViolation(
                f"{self.context}: the table sets delta.columnMapping.mode={metadata.column_mapping_mode} "
                "but its protocol does not list the columnMapping reader feature"
            )

    def body(self) -> Iterator[DataFile | Metadata | Protocol]:
        """Files (and, in change feeds, historical metaData and protocols) in server order; checks the ending."""
        for action in self._actions:
            if self.end is not None:
                raise ProtocolViolation(f"{self.context}: a line followed the endStreamAction")
            if isinstance(action, EndStreamAction):
                self._check_end(action)
                self.end = action
            elif isinstance(action, Metadata):
                yield action  # includeHistoricalMetadata / startingVersion: schema as of a version
            elif isinstance(action, Protocol) and self.response_format == DELTA:
                self.check_protocol(action)  # includeHistoricalProtocol: a feature enabled mid-range
                yield action
            elif isinstance(action, self.allowed):
                yield action
            else:
                raise ProtocolViolation(
                    f"{self.context}: unexpected {_KIND.get(type(action), 'other')} line in this response"
                )
        # Capabilities header: a server that echoed includeendstreamaction=true promised an ending.
        if self.end is None and self.end_expected:
            raise TruncatedStream(f"{self.context}: the response ended without its endStreamAction (cut off)")

    def _check_end(self, end: EndStreamAction) -> None:
        # endStreamAction.errorMessage: "the client must fail the query when present".
        if end.error_message:
            raise StreamError(f"{self.context}: the server failed while streaming: {end.error_message}")
