"""What the client's calls take and return: table coordinates and typed, collected answers.

A :class:`QueryResult` / :class:`ChangesResult` is a whole streamed answer (every page) with
what its endStreamActions said, including ``min_url_expiration_timestamp``, the bound on every
presigned URL in it (:mod:`sharesync.sync.protocol.refresh` plans URL renewal with it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sharesync.sync.core.changefeed import ChangeFeed, change_feed_of
from sharesync.sync.core.provider_text import NAME_CHARS, bounded_properties, one_line
from sharesync.sync.protocol.wire import (
    AddFile,
    CdfFile,
    ChangesRequest,
    DataFile,
    EndStreamAction,
    Metadata,
    Protocol,
    QueryRequest,
    RemoveFile,
    Share,
    Table,
)


@dataclass(frozen=True)
class ShareInfo:
    """What a provider says about one of its shares, made safe to show (one line each, bounded).

    Only shares carry a ``displayName``, ``comment`` and ``properties`` (spec "List Shares",
    "Get Share"); a table's own words are its metaData ``description``."""

    name: str
    display_name: str | None = None
    comment: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, share: Share) -> ShareInfo:
        return cls(
            share.name,
            one_line(share.display_name, NAME_CHARS),
            one_line(share.comment),
            bounded_properties(share.properties),
        )

    def describe(self) -> str | None:
        """One line: display name, comment and properties (None when the provider said nothing)."""
        props = ", ".join(f"{k}={v}" for k, v in self.properties.items())
        parts = [p for p in (self.display_name, self.comment, props) if p]
        return " — ".join(parts) or None


@dataclass(frozen=True)
class TableRef:
    """``share.schema.table``: the coordinates of one shared table."""

    share: str
    schema: str
    name: str

    @classmethod
    def of(cls, value: str | Table | TableRef) -> TableRef:
        if isinstance(value, TableRef):
            return value
        if isinstance(value, Table):
            return cls(value.share, value.schema_, value.name)
        parts = value.split(".")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise ValueError(f"'{value}' is not 'share.schema.table'")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.share}.{self.schema}.{self.name}"


TableLike = str | Table | TableRef


@dataclass(frozen=True)
class TableVersion:
    table: TableRef
    version: int


@dataclass(frozen=True)
class TableMetadata:
    table: TableRef
    version: int
    protocol: Protocol
    metadata: Metadata

    @property
    def cdf_enabled(self) -> bool:
        return self.metadata.cdf_enabled

    @property
    def change_feed(self) -> ChangeFeed:
        return change_feed_of(self.metadata.configuration)

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def description(self) -> str | None:
        """The provider's description of the table, made safe to show (one line, bounded)."""
        return one_line(self.metadata.description)


@dataclass(frozen=True)
class FilesResult:
    table: TableRef
    version: int  # Delta-Table-Version header of the response
    protocol: Protocol
    metadata: Metadata
    files: tuple[DataFile, ...]
    historical_metadata: tuple[Metadata, ...]
    historical_protocols: tuple[Protocol, ...]  # delta format, includeHistoricalProtocol
    response_format: str  # "parquet" or "delta": what the server chose
    end_stream_action: EndStreamAction | None = field(repr=False)  # of the last page; None from a legacy server
    refresh_token: str | None = field(repr=False)
    min_url_expiration_timestamp: int | None
    pages: int

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class QueryResult(FilesResult):
    request: QueryRequest


@dataclass(frozen=True)
class ChangesResult(FilesResult):
    request: ChangesRequest

    @property
    def adds(self) -> list[AddFile]:
        return [f for f in self.files if isinstance(f, AddFile)]

    @property
    def cdfs(self) -> list[CdfFile]:
        return [f for f in self.files if isinstance(f, CdfFile)]

    @property
    def removes(self) -> list[RemoveFile]:
        return [f for f in self.files if isinstance(f, RemoveFile)]
