"""One row of ``sharesync discover``: what the listing, its table and its ``--config`` entries share."""

from __future__ import annotations

from dataclasses import dataclass, field

from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.core.providers import DEFAULT_PROVIDER
from sharesync.sync.core.redact import redact
from sharesync.sync.delta.features import table_reader_features
from sharesync.sync.protocol.client import TableMetadata, TableRef

__all__ = ["DiscoveredTable"]


@dataclass(frozen=True)
class DiscoveredTable:
    """One row of the listing; a failing table has only its name and ``error``."""

    name: str
    version: int | None
    cdf_enabled: bool | None
    partition_columns: list[str] = field(default_factory=list)
    reader_features: list[str] = field(default_factory=list)  # empty for a plain (parquet-answered) table
    error: str | None = None
    provider: str = DEFAULT_PROVIDER  # the config's provider that shares it
    description: str | None = None  # the provider's, one line and bounded (ShareInfo: the share's words)

    @classmethod
    def of(cls, meta: TableMetadata) -> DiscoveredTable:
        protocol = meta.protocol
        features = table_reader_features(protocol.min_reader_version, protocol.reader_features)
        return cls(
            str(meta.table),
            meta.version,
            meta.cdf_enabled,
            meta.partition_columns,
            sorted(features),
            description=meta.description,
        )

    @classmethod
    def failed(cls, ref: TableRef, exc: Exception) -> DiscoveredTable:
        # SharesyncError messages are redacted already; anything else is redacted here.
        message = str(exc) if isinstance(exc, SharesyncError) else redact(f"{type(exc).__name__}: {exc}")
        return cls(str(ref), None, None, error=message)
