"""Keyword options of a query or change-feed call → a validated request (pure).

The Delta Sharing protocol allows some combinations only ("Read Data from a Table": at most one
of version, timestamp and startingVersion; refresh tokens only for the latest snapshot; "Read
Change Data Feed from a Table": exactly one start, at most one end); a wrong one is a
``ValueError`` here, before anything is sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict

from sharesync.sync.core.timestamps import to_wire
from sharesync.sync.protocol.wire import ChangesRequest, QueryRequest

Timestamp = datetime | str


class QueryOptions(TypedDict, total=False):
    """Keyword options of :meth:`SharingClient.query` (Delta Sharing protocol, "Read Data from a Table")."""

    version: int | None
    timestamp: Timestamp | None
    starting_version: int | None
    ending_version: int | None
    predicate_hints: Sequence[str] | None
    json_predicate_hints: str | Mapping[str, Any] | None
    limit_hint: int | None
    max_files: int | None
    include_refresh_token: bool | None
    refresh_token: str | None


class ChangesOptions(TypedDict, total=False):
    """Keyword options of :meth:`SharingClient.changes` (Delta Sharing protocol, "Read Change Data Feed from a Table")."""

    starting_version: int | None
    starting_timestamp: Timestamp | None
    ending_version: int | None
    ending_timestamp: Timestamp | None
    include_historical_metadata: bool
    include_historical_protocol: bool | None
    max_files: int | None


def build_query(
    default_max_files: int | None,
    *,
    version: int | None = None,
    timestamp: Timestamp | None = None,
    starting_version: int | None = None,
    ending_version: int | None = None,
    predicate_hints: Sequence[str] | None = None,
    json_predicate_hints: str | Mapping[str, Any] | None = None,
    limit_hint: int | None = None,
    max_files: int | None = None,
    include_refresh_token: bool | None = None,
    refresh_token: str | None = None,
) -> QueryRequest:
    """The body of Read Data from a Table; ``default_max_files`` when the call gives none."""
    if sum(x is not None for x in (version, timestamp, starting_version)) > 1:
        raise ValueError("give at most one of version, timestamp and starting_version")
    if ending_version is not None and starting_version is None:
        raise ValueError("ending_version needs starting_version")
    latest = version is None and timestamp is None and starting_version is None
    if (include_refresh_token or refresh_token) and not latest:
        raise ValueError("refresh tokens only exist for latest-snapshot queries (no version/timestamp)")
    if include_refresh_token is None:
        include_refresh_token = True if latest else None
    hints = json_predicate_hints
    return QueryRequest(
        predicate_hints=list(predicate_hints) if predicate_hints is not None else None,
        json_predicate_hints=json.dumps(hints) if isinstance(hints, Mapping) else hints,
        limit_hint=limit_hint,
        version=version,
        timestamp=to_wire(timestamp) if timestamp is not None else None,
        starting_version=starting_version,
        ending_version=ending_version,
        max_files=max_files if max_files is not None else default_max_files,
        include_refresh_token=include_refresh_token or None,
        refresh_token=refresh_token,
    )


def build_changes(
    default_max_files: int | None,
    *,
    starting_version: int | None = None,
    starting_timestamp: Timestamp | None = None,
    ending_version: int | None = None,
    ending_timestamp: Timestamp | None = None,
    include_historical_metadata: bool = False,
    include_historical_protocol: bool | None = None,
    max_files: int | None = None,
) -> ChangesRequest:
    """The query parameters of Read Change Data Feed from a Table.

    ``include_historical_protocol`` follows ``include_historical_metadata`` unless given: a caller
    that reads each version with its own schema must also see a reader feature enabled mid-range
    at the version it appears (only delta-format answers carry them).
    """
    if include_historical_protocol is None:
        include_historical_protocol = include_historical_metadata
    if (starting_version is None) == (starting_timestamp is None):
        raise ValueError("give exactly one of starting_version and starting_timestamp")
    if ending_version is not None and ending_timestamp is not None:
        raise ValueError("give at most one of ending_version and ending_timestamp")
    return ChangesRequest(
        starting_version=starting_version,
        starting_timestamp=to_wire(starting_timestamp) if starting_timestamp is not None else None,
        ending_version=ending_version,
        ending_timestamp=to_wire(ending_timestamp) if ending_timestamp is not None else None,
        include_historical_metadata=include_historical_metadata or None,
        include_historical_protocol=include_historical_protocol or None,
        max_files=max_files if max_files is not None else default_max_files,
    )


def describe_query(request: QueryRequest) -> str:
    """How a query names its snapshot in messages."""
    if request.version is not None:
        return f"version {request.version}"
    if request.timestamp is not None:
        return f"as of {request.timestamp}"
    end = "latest" if request.ending_version is None else request.ending_version
    return f"versions {request.starting_version}..{end}"
