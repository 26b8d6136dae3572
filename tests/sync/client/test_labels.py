"""The pure comparison of an answer's version labels with the request (:mod:`sharesync.sync.protocol.labels`).

What a correct provider may answer passes; each way a label can contradict the request is a
:class:`VersionMismatch` naming what was answered and what was asked for.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sharesync.sync.core.errors import ProtocolViolation, VersionMismatch
from sharesync.sync.protocol.labels import check_changes, check_metadata, check_not_older, check_query
from sharesync.sync.protocol.options import build_changes, build_query
from sharesync.sync.protocol.responses import ChangesResult, QueryResult, TableRef
from sharesync.sync.protocol.wire import DataFile, Metadata, Protocol, parse_action

SCHEMA = json.dumps({"type": "struct", "fields": []})
NOON = 1_714_564_800_000  # 2024-05-01T12:00:00Z
LATER = NOON + 3_600_000
TABLE = TableRef("s", "sc", "t")


def meta(version: int | None = None) -> Metadata:
    found = parse_action(json.dumps({"metaData": {"id": "t", "format": {"provider": "parquet"},
                                                  "schemaString": SCHEMA, "partitionColumns": [], "version": version}}))  # fmt: skip
    assert isinstance(found, Metadata)
    return found


def action(kind: str, name: str, **fields: Any) -> DataFile:
    body = {"url": f"https://b/{name}", "id": name, "partitionValues": {}, "size": 1, **fields}
    found = parse_action(json.dumps({kind: body}))
    assert isinstance(found, DataFile)
    return found


def snapshot(**fields: Any) -> DataFile:
    return action("file", "f", **fields)


def change(version: int, stamp: int = NOON, kind: str = "add") -> DataFile:
    return action(kind, f"{kind}{version}", version=version, timestamp=stamp)


def _fields(label: int, files: list[DataFile], metadata: Metadata | None, historical: tuple[Metadata, ...]) -> Any:
    return {"table": TABLE, "version": label, "protocol": Protocol(min_reader_version=1),
            "metadata": metadata or meta(), "files": tuple(files), "historical_metadata": historical,
            "historical_protocols": (), "response_format": "parquet", "end_stream_action": None,
            "refresh_token": None, "min_url_expiration_timestamp": None, "pages": 1}  # fmt: skip


def query(label: int, files: list[DataFile], metadata: Metadata | None = None, **asked: Any) -> None:
    """``asked`` of a server whose answer says ``label`` in its header."""
    request = build_query(None, **asked)
    check_query(request, QueryResult(request=request, **_fields(label, files, metadata, ())), "query s.sc.t")


def changes(label: int, files: list[DataFile], historical: tuple[Metadata, ...] = (), **asked: Any) -> None:
    request = build_changes(None, **asked)
    result = ChangesResult(request=request, **_fields(label, files, None, historical))
    check_changes(request, result, "changes of s.sc.t")


# ---------------------------------------------------------------- what a correct provider answers


@pytest.mark.parametrize(
    "case",
    [
        lambda: query(1, [snapshot(version=1, timestamp=NOON)], meta(1), version=1),
        lambda: query(1, [snapshot()], meta(), version=1),  # labels left out: only the header speaks
        lambda: query(4, [snapshot(version=4, timestamp=NOON)], meta(4), timestamp="2024-05-01T12:00:00Z"),
        lambda: query(4, [snapshot(version=4, timestamp=NOON)], meta(4), timestamp="2024-05-01T12:30:00Z"),
        lambda: query(9, [snapshot()], meta()),  # the latest snapshot: whatever version it is
        lambda: query(2, [change(2), change(3), change(7)], meta(2), starting_version=2, ending_version=3),  # a hint
        lambda: query(3, [change(3)], meta(2), starting_version=2),  # the header: the first version with files
        lambda: changes(2, [change(2), change(3, kind="cdf")], (meta(2), meta(3)), starting_version=2,
                        ending_version=3, include_historical_metadata=True),
        lambda: changes(2, [change(3)], starting_version=2, ending_version=3),
        lambda: changes(0, [change(3, stamp=NOON)], starting_timestamp="2024-05-01T12:00:00Z",
                        ending_timestamp="2024-05-01T12:00:00Z"),
    ],
)  # fmt: skip
def test_what_a_correct_provider_answers_passes(case: Any) -> None:
    case()


def test_a_changes_answer_without_historical_metadata_may_label_its_metadata_with_the_latest_version() -> None:
    """The reference server labels the one metaData of such an answer with the table's latest version."""
    request = build_changes(None, starting_version=2, ending_version=3)
    result = ChangesResult(request=request, **_fields(2, [change(2)], meta(9), ()))
    check_changes(request, result, "changes of s.sc.t")


# ---------------------------------------------------------------- what it must not


@pytest.mark.parametrize(
    ("case", "answered", "asked"),
    [
        (lambda: query(7, [snapshot()], version=1), r"version 7 \(Delta-Table-Version header\)", "version 1"),
        (lambda: query(1, [snapshot()], meta(7), version=1), r"version 7 \(metaData.version\)", "version 1"),
        (lambda: query(1, [snapshot(version=7)], version=1), "file f of version 7", "version 1"),
        (lambda: query(7, [snapshot(version=4)], timestamp="2024-05-01T12:00:00Z"), "file f of version 4",
         "as of 2024-05-01T12:00:00Z"),
        (lambda: query(4, [snapshot(version=4, timestamp=LATER)], timestamp="2024-05-01T12:00:00Z"),
         f"version 4, committed at {LATER} ms", "as of 2024-05-01T12:00:00Z"),
        (lambda: query(7, [change(2)], starting_version=2), r"version 7 \(Delta-Table-Version header\)",
         r"versions 2\.\.latest"),
        (lambda: query(2, [change(3)], meta(1), starting_version=2), "metaData of version 1", r"versions 2\.\.latest"),
        (lambda: changes(2, [change(2), change(4)], starting_version=2, ending_version=3), "file add4 of version 4",
         r"versions 2\.\.3"),
        (lambda: changes(9, [change(2)], starting_version=2, ending_version=3),
         r"version 9 \(Delta-Table-Version header\)", r"versions 2\.\.3"),
        (lambda: changes(2, [change(2)], (meta(9),), starting_version=2, ending_version=3,
                         include_historical_metadata=True), "metaData of version 9", r"versions 2\.\.3"),
        (lambda: changes(0, [change(2, kind="remove")], starting_timestamp="2024-05-01T00:00:00Z", ending_version=1), "file remove2 of version 2",
         r"versions 0\.\.1"),
        (lambda: changes(0, [change(3, stamp=LATER)], starting_timestamp="2024-05-01T12:00:00Z",
                         ending_timestamp="2024-05-01T12:00:00Z"), f"file add3 of version 3 committed at {LATER} ms",
         "changes committed from 2024-05-01T12:00:00Z to 2024-05-01T12:00:00Z"),
        (lambda: changes(0, [change(3, stamp=NOON)], starting_timestamp="2024-05-01T13:00:00Z"),
         f"file add3 of version 3 committed at {NOON} ms", "changes committed from 2024-05-01T13:00:00Z to the latest"),
    ],
)  # fmt: skip
def test_a_label_that_contradicts_the_request_is_refused(case: Any, answered: str, asked: str) -> None:
    with pytest.raises(VersionMismatch, match=rf"the provider answered {answered}.* for .*{asked}; nothing was"):
        case()


def test_the_message_names_both_versions_and_what_to_do() -> None:
    with pytest.raises(VersionMismatch) as caught:
        query(7, [snapshot()], version=1)
    assert isinstance(caught.value, ProtocolViolation)
    assert str(caught.value) == (
        "query s.sc.t: the provider answered version 7 (Delta-Table-Version header) for a request of version 1; "
        "nothing was written — the provider does not honour time travel; sync this table from the provider's "
        "latest version instead (no 'start' or backfill), and report it to the provider"
    )


@pytest.mark.parametrize(
    ("answered", "metadata", "passes"),
    [(3, meta(), True), (3, meta(3), True), (9, meta(3), True), (9, meta(), False), (3, meta(9), False)],
)
def test_metadata_at_a_version_is_that_versions_by_its_metadata_label_or_else_its_header(
    answered: int, metadata: Metadata, passes: bool
) -> None:
    """``/metadata``'s header was once documented as the current version: a metaData.version of
    the one asked for is enough; without one, the header must say it."""
    if passes:
        check_metadata(3, answered, metadata, "metadata of s.sc.t")
        return
    with pytest.raises(VersionMismatch, match=r"answered version 9 for a request of version 3"):
        check_metadata(3, answered, metadata, "metadata of s.sc.t")


def test_a_latest_snapshot_older_than_a_version_known_is_refused() -> None:
    check_not_older(5, 5, "snapshot of s.sc.t")
    check_not_older(6, 5, "snapshot of s.sc.t")
    with pytest.raises(
        VersionMismatch, match="answered version 4 as its latest for the latest snapshot, after it said"
    ):
        check_not_older(4, 5, "snapshot of s.sc.t")
