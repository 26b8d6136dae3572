"""Which response format a table is answered in, and which tables a client may not read at all.

The rules are the reference server's (delta-io/delta-sharing ``DeltaSharingService``,
``SnapshotChecker``, ``DeltaSharedTableKernel.getRespondedFormat``), so a client tested here
meets the same answers at a real provider:

* The ``delta-sharing-capabilities`` header names the formats the client reads
  (``responseformat``, default ``parquet``) and the reader features it supports.
* One format asked for: that format. Both: parquet for a plain table (reader version 1),
  delta otherwise.
* A table whose properties turn on deletion vectors or column mapping is refused with
  ``400 UNSUPPORTED_OPERATION`` "Unsupported Delta Table Properties" unless the client lists
  the matching reader feature, and is never answered in parquet (its files cannot be read
  correctly without the DVs or the column mapping). A file carrying a DV for a client that
  does not read DVs is refused as "Deletion Vector property disabled".
* Parquet answers report ``minReaderVersion: 1``: what remains after the checks above reads
  correctly as plain parquet (the reference server sends the same "fake" protocol).
* The ``fileidhash`` header (spec "File ID Hash Header") picks the file id scheme of ``/query``
  and ``/changes``: ``parquet`` or ``delta``, case-insensitive, echoed in lower case; another value
  is a 400. Both schemes here are the md5 of the file's log path (the encoding is
  implementation-defined): a data file re-added with a new deletion vector keeps its id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sharesync.sync.server.logmodel import FileEntry, TableMetadata, TableProtocol
from sharesync.sync.server.problems import invalid, unsupported

PARQUET = "parquet"
DELTA = "delta"
UNSUPPORTED_PROPERTIES = "Unsupported Delta Table Properties"
DV_PROPERTY_DISABLED = "Deletion Vector property disabled"


FILE_ID_HASH_HEADER = "fileidhash"
FILE_ID_SCHEMES = ("delta", "parquet")


def file_id_scheme(header: str | None) -> str | None:
    """The file id scheme a request asks for (None: no ``fileidhash`` header); 400 on another value."""
    if header is None:
        return None
    scheme = header.strip().lower()
    if scheme not in FILE_ID_SCHEMES:
        raise invalid(f"Unsupported fileidhash value: {header!r}. Supported values: {', '.join(FILE_ID_SCHEMES)}.")
    return scheme


def parse_capabilities(header: str | None) -> dict[str, str]:
    """``key=v1,v2;key2=v`` → {key: "v1,v2"}; case-insensitive (spec "Capabilities Header")."""
    result: dict[str, str] = {}
    for part in (header or "").lower().split(";"):
        key, sep, value = part.partition("=")
        if sep:
            result[key.strip()] = value.strip()
    return result


def _values(raw: str | None) -> frozenset[str]:
    return frozenset(v.strip() for v in (raw or "").split(",") if v.strip())


@dataclass(frozen=True)
class Capabilities:
    """What the client says it can read."""

    formats: frozenset[str] = frozenset({PARQUET})
    reader_features: frozenset[str] = frozenset()
    include_end_stream: bool = False

    @classmethod
    def from_header(cls, header: str | None) -> Capabilities:
        caps = parse_capabilities(header)
        formats = _values(caps.get("responseformat")) & {PARQUET, DELTA}
        return cls(
            formats=formats or frozenset({PARQUET}),
            reader_features=_values(caps.get("readerfeatures")),
            include_end_stream=caps.get("includeendstreamaction") == "true",
        )

    def choose(self, protocol: TableProtocol, metadatas: Iterable[TableMetadata]) -> str:
        """The format to answer in, or the reference server's refusal."""
        needed: set[str] = set()
        for metadata in metadatas:
            needed |= metadata.required_reader_features
        if needed - self.reader_features:
            raise unsupported(UNSUPPORTED_PROPERTIES)
        if len(self.formats) == 1:
            chosen = next(iter(self.formats))
        else:
            chosen = PARQUET if protocol.min_reader_version == 1 and not needed else DELTA
        if chosen == PARQUET and needed:
            raise unsupported(UNSUPPORTED_PROPERTIES)
        return chosen

    def check_files(self, response_format: str, entries: Iterable[FileEntry]) -> None:
        """Refuse DVs the answer cannot carry (before the 200, while a 400 is still possible)."""
        if response_format == DELTA and "deletionvectors" in self.reader_features:
            return
        if any(e.deletion_vector is not None for e in entries):
            raise unsupported(DV_PROPERTY_DISABLED)
