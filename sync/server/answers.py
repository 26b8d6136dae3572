"""Shared pieces of every table answer: the request context, format negotiation, and the lines.

An :class:`Answer` is the whole response of ``/metadata``, ``/query`` or ``/changes``: the
``Delta-Table-Version`` header value, the response format, and the lines as JSON objects.
Everything that can be refused is checked before an answer exists (a 400 is still possible);
the file lines are produced lazily while the body streams, so a failure there (a file gone
from disk while its size is needed, say) reaches the client as ``endStreamAction.errorMessage``
(spec "EndStreamAction"). Parquet-format lines are built from the wire models in
:mod:`sharesync.sync.protocol.wire` so server and client cannot drift apart; delta-format lines
come from :mod:`~sharesync.sync.server.delta_lines`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from sharesync.sync.core.remote_table import RemoteTable
from sharesync.sync.protocol.wire import (
    AddFile,
    CdfFile,
    EndStreamAction,
    File,
    Format,
    Metadata,
    Protocol,
    RemoveFile,
    TableAccess,
    WireModel,
    wrap_action,
)
from sharesync.sync.server import delta_lines
from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.deltalog import DeltaLog
from sharesync.sync.server.logmodel import FileEntry, JsonObject, LogError, Snapshot, TableMetadata, TableProtocol
from sharesync.sync.server.negotiation import DELTA, PARQUET, Capabilities
from sharesync.sync.server.problems import invalid
from sharesync.sync.server.signing import SignatureError, Signer, file_id

PARQUET_READER_VERSION = 1


@dataclass
class Context:
    """Everything an answer depends on besides the request itself (``now_ms`` included: pure)."""

    table: SharedTable
    log: DeltaLog
    signer: Signer
    files_base: str  # e.g. http://127.0.0.1:8080/delta-sharing/files
    now_ms: int
    url_ttl_ms: int
    token_ttl_ms: int
    max_page_size: int
    capabilities: Capabilities = field(default_factory=Capabilities)
    verify_files: bool = True  # False: presign without checking the files exist, as the reference does
    remote: RemoteTable | None = None  # a table in S3: its files are presigned S3 URLs
    response_format: str = PARQUET  # set by :meth:`negotiate`
    _min_expiry: int | None = field(default=None, repr=False)

    @property
    def include_end_stream(self) -> bool:
        return self.capabilities.include_end_stream

    @property
    def delta(self) -> bool:
        return self.response_format == DELTA

    def negotiate(
        self, protocol: TableProtocol, metadatas: Iterable[TableMetadata], files: Iterable[FileEntry] = ()
    ) -> None:
        """Pick the response format for these table states, or refuse (see :mod:`.features`)."""
        self.response_format = self.capabilities.choose(protocol, metadatas)
        self.capabilities.check_files(self.response_format, files)

    # -- presigned URLs

    def sign_path(self, log_path: str) -> tuple[str, int]:
        """A URL for one file of the table (its path as the log writes it) plus its expiry (epoch ms)."""
        if self.remote is not None:
            url, expires = self.remote.presign(log_path, max(1, self.url_ttl_ms // 1000), self.now_ms)
            self._min_expiry = expires if self._min_expiry is None else min(self._min_expiry, expires)
            return url, expires
        expires = self.now_ms + self.url_ttl_ms
        key = file_key(self.table, log_path)
        # ``sp=r`` (read permission, as in an Azure SAS) marks the URL as presigned for clients that
        # recognise presigned URLs by their query keys (Delta Kernel's default engine does).
        sig = self.signer.sign_file(key, expires)
        url = f"{self.files_base}/{quote(key, safe='/')}?exp={expires}&sig={sig}&sp=r"
        self._min_expiry = expires if self._min_expiry is None else min(self._min_expiry, expires)
        return url, expires

    def end_stream(self, *, next_page_token: str | None = None, refresh_token: str | None = None) -> JsonObject:
        return wrap_action(
            EndStreamAction(
                next_page_token=next_page_token,
                refresh_token=refresh_token,
                min_url_expiration_timestamp=self._min_expiry,
            )
        )

    # -- tokens

    def issue_token(self, kind: str, payload: dict[str, Any]) -> str:
        return self.signer.encode_token(kind, {"t": self.table.id, **payload}, self.now_ms + self.token_ttl_ms)

    def read_page_token(self, kind: str, token: str, checksum: str) -> dict[str, Any]:
        """Decode a page token; the messages are the reference server's."""
        try:
            payload = self.signer.decode_token(kind, token, self.now_ms)
        except SignatureError as exc:
            if exc.expired:
                raise invalid("The page token has expired. Please restart the query.") from None
            raise invalid(f"Error decoding the page token: {token}.") from None
        if payload.get("t") != self.table.id:
            raise invalid("The table specified in the page token does not match the table being queried.")
        if payload.get("c") != checksum:
            raise invalid(
                "Query parameter mismatch detected for the next page query. "
                "The query parameter cannot change when querying the next page results."
            )
        return payload

    def page_size(self, max_files: int | None) -> int | None:
        if max_files is None:
            return None
        if max_files <= 0:
            raise invalid("maxFiles must be a positive number.")
        return min(max_files, self.max_page_size)


def file_key(table: SharedTable, log_path: str) -> str:
    """What a file URL names and signs: the table's names and the log's path."""
    return f"{table.share}/{table.schema}/{table.name}/{log_path}"


@dataclass(frozen=True)
class Answer:
    version: int
    lines: Iterable[JsonObject]
    response_format: str = PARQUET


# ---------------------------------------------------------------- protocol and metadata lines


def protocol_line(ctx: Context, protocol: TableProtocol, *, version: int | None = None) -> JsonObject:
    """Parquet answers say reader version 1: the negotiation refused what parquet cannot carry."""
    if ctx.delta:
        return delta_lines.protocol_line(protocol, version=version)
    return wrap_action(Protocol(min_reader_version=PARQUET_READER_VERSION))


def _clean_schema(schema_string: str) -> str:
    """Keep only column comments in field metadata, as the reference server does."""
    try:
        schema = json.loads(schema_string)
        for column in schema.get("fields", []):
            meta = column.get("metadata") or {}
            column["metadata"] = {"comment": meta["comment"]} if "comment" in meta else {}
        return json.dumps(schema, separators=(",", ":"))
    except (ValueError, AttributeError):
        return schema_string


def metadata_line(
    ctx: Context, meta: TableMetadata, *, version: int | None = None, snapshot: Snapshot | None = None
) -> JsonObject:
    """The ``metaData`` line. In parquet, ``configuration`` is only the reference server's
    ``enableChangeDataFeed`` (the table's own properties stay private); in delta, all of it."""
    access = TableAccess(location=ctx.table.location, access_modes=ctx.table.access_modes)
    if ctx.delta:
        return delta_lines.metadata_line(meta, version=version, snapshot=snapshot, extra=access.to_wire())
    return wrap_action(
        Metadata(
            id=meta.id,
            name=meta.name,
            description=meta.description,
            format=Format(provider="parquet"),
            schema_string=_clean_schema(meta.schema_string),
            partition_columns=list(meta.partition_columns),
            configuration={"enableChangeDataFeed": "true"} if meta.cdf_enabled else {},
            version=version,
            size=snapshot.size if snapshot is not None else None,
            num_files=len(snapshot.files) if snapshot is not None else None,
            location=access.location,
            access_modes=access.access_modes,
        )
    )


# ---------------------------------------------------------------- file lines


def file_line(
    ctx: Context, entry: FileEntry, *, version: int | None = None, timestamp: int | None = None
) -> JsonObject:
    """A file of a snapshot query."""
    if ctx.delta:
        return delta_lines.file_line(ctx.sign_path, "add", entry, version=version, timestamp=timestamp)
    url, expires = ctx.sign_path(entry.path)
    return wrap_action(
        File(
            url=url,
            id=file_id(entry.path),
            partition_values=entry.partition_values,
            size=_size(ctx, entry),
            stats=entry.stats,
            version=version,
            timestamp=timestamp,
            expiration_timestamp=expires,
        )
    )


def change_line(ctx: Context, kind: str, entry: FileEntry, version: int, timestamp: int) -> JsonObject:
    """``add``/``remove``/``cdf`` lines of a change query (spec "Data Change Files")."""
    if ctx.delta:
        return delta_lines.file_line(ctx.sign_path, kind, entry, version=version, timestamp=timestamp)
    url, expires = ctx.sign_path(entry.path)
    common: dict[str, Any] = {
        "url": url,
        "id": file_id(entry.path),
        "partition_values": entry.partition_values,
        "size": _size(ctx, entry),
        "version": version,
        "timestamp": timestamp,
        "expiration_timestamp": expires,
    }
    model: WireModel
    if kind == "add":
        model = AddFile(stats=entry.stats, **common)
    elif kind == "remove":
        model = RemoveFile(**common)
    else:
        model = CdfFile(**common)
    return wrap_action(model)


def _size(ctx: Context, entry: FileEntry) -> int:
    """``remove`` actions may omit the size; the file on disk knows it, while it is there."""
    if entry.size is not None:
        return entry.size
    try:
        return ctx.log.file_path(entry.path).stat().st_size
    except FileNotFoundError:
        raise LogError(
            f"file {entry.path} of table {ctx.table.full_name} is gone from storage and the log does not record "
            "its size"
        ) from None


def lazily(*parts: Iterable[JsonObject]) -> Iterator[JsonObject]:
    """Chain parts of an answer; parts that are generators run only while the body streams."""
    for part in parts:
        yield from part
