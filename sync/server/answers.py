"""Shared pieces of every table answer: the request context, presigned file actions, metadata lines.

An :class:`Answer` is the whole response of ``/metadata``, ``/query`` or ``/changes`` before it
is streamed: the ``Delta-Table-Version`` header value and the actions, built from the wire
models in :mod:`sharesync.sync.protocol.wire` so server and client cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from sharesync.sync.protocol.wire import (
    AddFile,
    CdfFile,
    EndStreamAction,
    File,
    Format,
    Metadata,
    Protocol,
    RemoveFile,
    WireModel,
)
from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.deltalog import DeltaLog, FileEntry, Snapshot, TableMetadata
from sharesync.sync.server.problems import invalid, unsupported
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
    include_end_stream: bool = False
    _min_expiry: int | None = field(default=None, repr=False)

    # -- presigned URLs

    def sign(self, entry: FileEntry) -> tuple[str, int]:
        """A URL for one file plus its expiry (epoch ms)."""
        expires = self.now_ms + self.url_ttl_ms
        key = file_key(self.table, entry.path)
        url = f"{self.files_base}/{quote(key, safe='/')}?exp={expires}&sig={self.signer.sign_file(key, expires)}"
        self._min_expiry = expires if self._min_expiry is None else min(self._min_expiry, expires)
        return url, expires

    def end_stream(self, *, next_page_token: str | None = None, refresh_token: str | None = None) -> EndStreamAction:
        return EndStreamAction(
            next_page_token=next_page_token,
            refresh_token=refresh_token,
            min_url_expiration_timestamp=self._min_expiry,
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
    actions: list[WireModel]


# ---------------------------------------------------------------- protocol and metadata lines


def protocol_line(reader_version: int, table: SharedTable) -> Protocol:
    """Only parquet-format tables can be shared; reader features need the delta format."""
    if reader_version > PARQUET_READER_VERSION:
        raise unsupported(
            f"Table {table.full_name} requires Delta reader version {reader_version}; this server "
            "only shares tables readable in the parquet response format (reader version 1)."
        )
    return Protocol(min_reader_version=PARQUET_READER_VERSION)


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


def metadata_line(meta: TableMetadata, *, version: int | None = None, snapshot: Snapshot | None = None) -> Metadata:
    """The ``metaData`` line; ``configuration`` keeps the table's own keys and adds the
    reference server's ``enableChangeDataFeed`` so clients reading either form see CDF."""
    configuration = dict(meta.configuration)
    if meta.cdf_enabled:
        configuration.setdefault("enableChangeDataFeed", "true")
    return Metadata(
        id=meta.id,
        name=meta.name,
        description=meta.description,
        format=Format(provider="parquet"),
        schema_string=_clean_schema(meta.schema_string),
        partition_columns=list(meta.partition_columns),
        configuration=configuration,
        version=version,
        size=snapshot.size if snapshot is not None else None,
        num_files=len(snapshot.files) if snapshot is not None else None,
    )


# ---------------------------------------------------------------- file lines


def file_line(ctx: Context, entry: FileEntry, *, version: int | None = None, timestamp: int | None = None) -> File:
    url, expires = ctx.sign(entry)
    return File(
        url=url,
        id=file_id(entry.path),
        partition_values=entry.partition_values,
        size=_size(ctx, entry),
        stats=entry.stats,
        version=version,
        timestamp=timestamp,
        expiration_timestamp=expires,
    )


def change_line(ctx: Context, kind: str, entry: FileEntry, version: int, timestamp: int) -> WireModel:
    """``add``/``remove``/``cdf`` lines of a change query (spec "Data Change Files")."""
    url, expires = ctx.sign(entry)
    common: dict[str, Any] = {
        "url": url,
        "id": file_id(entry.path),
        "partition_values": entry.partition_values,
        "size": _size(ctx, entry),
        "version": version,
        "timestamp": timestamp,
        "expiration_timestamp": expires,
    }
    if kind == "add":
        return AddFile(stats=entry.stats, **common)
    if kind == "remove":
        return RemoveFile(**common)
    return CdfFile(**common)


def _size(ctx: Context, entry: FileEntry) -> int:
    """``remove`` actions may omit the size; the file on disk knows it."""
    if entry.size is not None:
        return entry.size
    return ctx.log.file_path(entry.path).stat().st_size
