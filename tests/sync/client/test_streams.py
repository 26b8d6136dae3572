"""Query / changes / metadata / version: streamed NDJSON, pages, endStreamAction rules, resumption."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from sharesync.sync.core.errors import ProtocolViolation, StreamError, TruncatedStream
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.wire import AddFile, CdfFile, File, Metadata, RemoveFile

from .conftest import ASKED, ECHO, FakeClock, end, file, metadata, ndjson, protocol

Make = Callable[..., SharingClient]
TABLE = "s.sc.t"


def recorder(*responses: httpx.Response | Callable[[httpx.Request], httpx.Response]) -> tuple[
    list[httpx.Request], Callable[[httpx.Request], httpx.Response]
]:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = responses[min(len(seen), len(responses)) - 1]
        return item(request) if callable(item) else item

    return seen, handler


def body(request: httpx.Request) -> dict[str, Any]:
    return json.loads(request.content) if request.content else {}


class LineStream(httpx.SyncByteStream):
    """Sends lines one by one; optionally breaks after ``break_after`` lines. Records what was pulled."""

    def __init__(self, lines: list[dict[str, Any]], break_after: int | None = None) -> None:
        self.lines = lines
        self.break_after = break_after
        self.pulled = 0
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for i, line in enumerate(self.lines):
            if self.break_after is not None and i == self.break_after:
                raise httpx.ReadError("connection reset by peer")
            self.pulled += 1
            yield (json.dumps(line) + "\n").encode()

    def close(self) -> None:
        self.closed = True


def streamed(stream: LineStream, version: int = 5) -> httpx.Response:
    headers = {"Delta-Table-Version": str(version), "delta-sharing-capabilities": ECHO}
    return httpx.Response(200, headers=headers, stream=stream)


# ---------------------------------------------------------------- version and metadata


def test_table_version_reads_the_header(make_client: Make) -> None:
    seen, handler = recorder(httpx.Response(200, headers={"Delta-Table-Version": "42"}))
    result = make_client(handler).table_version(TABLE, starting_timestamp="2024-01-01T02:00:00+02:00")
    assert result.version == 42 and str(result.table) == TABLE
    assert seen[0].method == "GET" and seen[0].url.path == "/delta-sharing/shares/s/schemas/sc/tables/t/version"
    assert seen[0].url.params["startingTimestamp"] == "2024-01-01T00:00:00Z"


@pytest.mark.parametrize("headers", [{}, {"Delta-Table-Version": "x1"}, {"Delta-Table-Version": "-1"}])
def test_a_missing_or_bad_version_header_is_a_protocol_violation(make_client: Make, headers: dict[str, str]) -> None:
    seen, handler = recorder(httpx.Response(200, headers=headers))
    with pytest.raises(ProtocolViolation, match="Delta-Table-Version"):
        make_client(handler).table_version(TABLE)
    assert len(seen) == 1


def test_metadata(make_client: Make) -> None:
    meta = metadata(partitionColumns=["day"], configuration={"delta.enableChangeDataFeed": "true"})
    seen, handler = recorder(ndjson([protocol(), meta, end()], version=7))
    result = make_client(handler).metadata(TABLE)
    assert (result.version, result.cdf_enabled, result.partition_columns) == (7, True, ["day"])
    assert result.protocol.min_reader_version == 1
    assert seen[0].headers["delta-sharing-capabilities"] == ASKED


def test_metadata_without_version_header_is_a_protocol_violation(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([protocol(), metadata(), end()], version=None))
    with pytest.raises(ProtocolViolation, match="no Delta-Table-Version header"):
        make_client(handler).metadata(TABLE)


def test_a_file_in_a_metadata_answer_is_a_protocol_violation(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([protocol(), metadata(), file("a"), end()]))
    with pytest.raises(ProtocolViolation, match="unexpected file line"):
        make_client(handler).metadata(TABLE)


# ---------------------------------------------------------------- query


def test_latest_snapshot_query(make_client: Make) -> None:
    seen, handler = recorder(ndjson(
        [protocol(), metadata(), file("a", 3, expirationTimestamp=2000), file("b", 4),
         end(refreshToken="refresh-1", minUrlExpirationTimestamp=1900)], version=9))
    result = make_client(handler).query(TABLE)
    assert [(f.id, f.size) for f in result.files] == [("a", 3), ("b", 4)] and result.size == 7
    assert all(isinstance(f, File) for f in result.files)
    assert (result.version, result.refresh_token, result.min_url_expiration_timestamp, result.pages) == (9, "refresh-1", 1900, 1)
    request = seen[0]
    assert request.method == "POST" and request.url.path.endswith("/tables/t/query")
    assert body(request) == {"includeRefreshToken": True}
    assert request.headers["delta-sharing-capabilities"] == ASKED
    assert request.headers["content-type"].startswith("application/json")


def test_query_parameters_go_into_the_body(make_client: Make) -> None:
    def answer(request: httpx.Request) -> httpx.Response:  # labelled as a correct server labels it
        asked = body(request)
        return ndjson([protocol(), metadata(), end()], version=asked.get("version", asked.get("startingVersion", 5)))

    seen, handler = recorder(answer)
    client = make_client(handler)
    hints = {"op": "equal", "children": [{"op": "column", "name": "day", "valueType": "date"},
                                         {"op": "literal", "value": "2024-01-01", "valueType": "date"}]}
    client.query(TABLE, version=3, predicate_hints=["day = '2024-01-01'"], json_predicate_hints=hints, limit_hint=10)
    client.query(TABLE, timestamp="2024-01-01")
    client.query(TABLE, starting_version=2, ending_version=4, max_files=50)
    client.query(TABLE, refresh_token="tok-r")
    assert body(seen[0]) == {"version": 3, "predicateHints": ["day = '2024-01-01'"], "jsonPredicateHints": json.dumps(hints),
                             "limitHint": 10}
    assert body(seen[1]) == {"timestamp": "2024-01-01T00:00:00Z"}
    assert body(seen[2]) == {"startingVersion": 2, "endingVersion": 4, "maxFiles": 50}
    assert body(seen[3]) == {"includeRefreshToken": True, "refreshToken": "tok-r"}


@pytest.mark.parametrize(
    "kwargs",
    [{"version": 1, "timestamp": "2024-01-01"}, {"ending_version": 3}, {"version": 2, "refresh_token": "x"},
     {"starting_version": 1, "include_refresh_token": True}],
)
def test_contradictory_query_arguments_are_refused(make_client: Make, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_client(lambda r: httpx.Response(500)).query(TABLE, **kwargs)


def test_query_pages_are_followed(make_client: Make) -> None:
    def page(request: httpx.Request) -> httpx.Response:
        token = body(request).get("pageToken")
        files, nxt = {None: (["a", "b"], "p2"), "p2": (["c", "d"], "p3"), "p3": (["e"], "")}[token]
        extra = {"refreshToken": "rt-first"} if token is None else {}
        return ndjson([protocol(), metadata(), *(file(f) for f in files), end(nextPageToken=nxt, **extra)])

    seen, handler = recorder(page)
    result = make_client(handler, max_files=2).query(TABLE)
    assert [f.id for f in result.files] == ["a", "b", "c", "d", "e"]
    assert result.pages == 3 and result.refresh_token == "rt-first"
    assert [body(r) for r in seen] == [
        {"includeRefreshToken": True, "maxFiles": 2},
        {"maxFiles": 2, "pageToken": "p2"},  # refresh tokens belong to the first page only
        {"maxFiles": 2, "pageToken": "p3"},
    ]


def test_a_page_of_another_version_is_a_protocol_violation(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([protocol(), metadata(), file("a"), end(nextPageToken="p2")], version=5),
                             ndjson([protocol(), metadata(), file("b"), end()], version=6))
    with pytest.raises(ProtocolViolation, match=r"table changed between pages \(version 5 → 6\)"):
        make_client(handler).query(TABLE)


def test_the_iterator_streams_without_reading_the_whole_body(make_client: Make) -> None:
    stream = LineStream([protocol(), metadata(), *(file(f"f{i}") for i in range(1000)), end()])
    _seen, handler = recorder(streamed(stream))
    with make_client(handler).iter_query(TABLE) as files:
        assert files.version == 5 and files.metadata.id == "table-id"  # known before the first file
        first = next(files)
        assert first.id == "f0" and stream.pulled <= 4
    assert stream.closed  # leaving early closes the response


# ---------------------------------------------------------------- endStreamAction rules


def test_a_truncated_stream_is_retried(make_client: Make, clock: FakeClock) -> None:
    seen, handler = recorder(ndjson([protocol(), metadata(), file("a")]),  # echoed, but no endStreamAction
                             ndjson([protocol(), metadata(), file("a"), end()]))
    result = make_client(handler).query(TABLE)
    assert [f.id for f in result.files] == ["a"] and len(seen) == 2 and len(clock.sleeps) == 1


def test_a_stream_that_stays_truncated_fails(make_client: Make) -> None:
    seen, handler = recorder(ndjson([protocol(), metadata(), file("a")]))
    with pytest.raises(TruncatedStream, match="ended without its endStreamAction"):
        make_client(handler).query(TABLE)
    assert len(seen) == 5


def test_a_line_cut_in_half_is_a_truncated_stream(make_client: Make) -> None:
    cut = json.dumps(file("b"))[:30]
    seen, handler = recorder(ndjson([protocol(), metadata(), file("a"), cut], echo=False, tail=""),
                             ndjson([protocol(), metadata(), file("a"), file("b")], echo=False))
    assert [f.id for f in make_client(handler).query(TABLE).files] == ["a", "b"]
    assert len(seen) == 2


def _with_bytes(response: httpx.Response, old: bytes, new: bytes) -> httpx.Response:
    return httpx.Response(200, headers=response.headers, content=response.content.replace(old, new))


def test_a_line_cut_inside_a_character_is_a_truncated_stream(make_client: Make) -> None:
    plain = ndjson([protocol(), metadata(), file("a", partitionValues={"city": "Zurich"})], echo=False, tail="")
    whole = _with_bytes(plain, b"Zurich", "Zürich".encode())
    cut = httpx.Response(200, headers=whole.headers, content=whole.content[: whole.content.index(b"\xc3") + 1])
    seen, handler = recorder(cut, ndjson([protocol(), metadata(), file("a")], echo=False))
    assert [f.id for f in make_client(handler).query(TABLE).files] == ["a"]
    assert len(seen) == 2


def test_a_line_that_is_not_utf8_is_a_protocol_violation(make_client: Make) -> None:
    whole = ndjson([protocol(), metadata(), file("a", partitionValues={"city": "Zu"}), end()])
    _seen, handler = recorder(_with_bytes(whole, b'"Zu"', b'"Z\xffu"'))
    with pytest.raises(ProtocolViolation, match="not UTF-8"):
        make_client(handler).query(TABLE)


def test_an_empty_body_is_a_truncated_stream(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([], tail=""))
    with pytest.raises(TruncatedStream, match="before its protocol and metaData"):
        make_client(handler, retry=RetryPolicy(max_attempts=1)).query(TABLE)


def test_an_error_message_fails_the_call(make_client: Make) -> None:
    seen, handler = recorder(ndjson([protocol(), metadata(), file("a"), end(errorMessage="disk on fire")]))
    with pytest.raises(StreamError, match=r"query s.sc.t \(snapshot\): the server failed while streaming: disk on fire"):
        make_client(handler).query(TABLE)
    assert len(seen) == 1  # not retried


def test_an_error_message_before_the_header_fails_the_call(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([end(errorMessage="no such snapshot")]))
    with pytest.raises(StreamError, match="no such snapshot"):
        make_client(handler).metadata(TABLE)


def test_a_legacy_server_without_end_stream_action_is_accepted(make_client: Make) -> None:
    seen, handler = recorder(ndjson([protocol(), metadata(), file("a"), file("b")], echo=False))
    result = make_client(handler).query(TABLE)
    assert [f.id for f in result.files] == ["a", "b"] and result.end_stream_action is None
    assert len(seen) == 1


def test_a_server_that_says_false_is_treated_as_legacy(make_client: Make) -> None:
    headers = {"delta-sharing-capabilities": "responseformat=parquet;includeendstreamaction=false"}
    _seen, handler = recorder(ndjson([protocol(), metadata(), file("a")], echo=False, headers=headers))
    assert len(make_client(handler).query(TABLE).files) == 1


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        ([protocol(), metadata(), end(), file("a")], "a line followed the endStreamAction"),
        ([metadata(), file("a"), end()], "expected protocol and metaData first, got file line"),
        ([protocol(), metadata(), protocol(), end()], "unexpected protocol line"),
        ([protocol(), metadata(), '{"file": {"id": "x"}, "file": {"id": "y"}}', end()], "repeats the key 'file'"),
        ([{"protocol": {"minReaderVersion": 2}}, metadata(), end()], "needs reader version 2.*upgrade sharesync"),
    ],
)
def test_grammar_violations(make_client: Make, lines: list[Any], match: str) -> None:
    seen, handler = recorder(ndjson(lines))
    with pytest.raises(ProtocolViolation, match=match):
        make_client(handler).query(TABLE)
    assert len(seen) == 1  # a broken answer is not retried


def test_an_unknown_action_is_skipped_for_forward_compatibility(make_client: Make, caplog: pytest.LogCaptureFixture) -> None:
    # Was a ProtocolViolation; a newer server may add actions (here one the reference server has, queryStatus).
    lines = [protocol(), {"queryStatus": {"queryId": "q"}}, metadata(), file("a"),
             {"futureAction": {"x": 1}, "alsoNew": {}}, file("b"), end()]
    seen, handler = recorder(ndjson(lines))
    with caplog.at_level(logging.DEBUG, logger="sharesync.sync.protocol.ndjson"):
        result = make_client(handler).query(TABLE)
    assert [f.id for f in result.files] == ["a", "b"] and len(seen) == 1
    skipped = [r.getMessage() for r in caplog.records if "does not know" in r.getMessage()]
    assert len(skipped) == 2 and "'queryStatus'" in skipped[0] and "'futureAction', 'alsoNew'" in skipped[1]


def test_an_unknown_key_beside_a_known_action_is_ignored(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([protocol(), metadata(), {**file("a"), "annotation": {"x": 1}}, end()]))
    assert [f.id for f in make_client(handler).query(TABLE).files] == ["a"]


def test_an_answer_in_another_format_is_refused(make_client: Make) -> None:
    # Either format we offered is read (tests/sync/client/test_delta_format.py); nothing else.
    headers = {"delta-sharing-capabilities": "responseformat=arrow"}
    _seen, handler = recorder(ndjson([protocol(), metadata(), end()], echo=False, headers=headers))
    with pytest.raises(ProtocolViolation, match="answered in responseformat='arrow'; sharesync reads parquet and delta"):
        make_client(handler).query(TABLE)


# ---------------------------------------------------------------- resumption


def test_a_page_broken_mid_stream_resumes_without_repeating_files(make_client: Make, clock: FakeClock) -> None:
    lines = [protocol(), metadata(), *(file(f"f{i}") for i in range(6)), end()]
    seen, handler = recorder(streamed(LineStream(lines, break_after=5)), streamed(LineStream(lines)))
    received: list[str] = []
    with make_client(handler).iter_query(TABLE) as files:
        for f in files:
            received.append(f.id)
    assert received == [f"f{i}" for i in range(6)] and len(seen) == 2


def test_a_resumed_page_with_other_files_is_refused(make_client: Make) -> None:
    first = [protocol(), metadata(), file("a"), file("b"), end()]
    other = [protocol(), metadata(), file("x"), file("b"), end()]
    _seen, handler = recorder(streamed(LineStream(first, break_after=3)), streamed(LineStream(other)))
    with pytest.raises(ProtocolViolation, match="lists different files"):
        make_client(handler).query(TABLE)


# ---------------------------------------------------------------- changes


def test_changes(make_client: Make) -> None:
    historical = metadata(version=2, configuration={"delta.enableChangeDataFeed": "true"})
    seen, handler = recorder(ndjson([
        protocol(), metadata(), file("a", kind="add", version=1), historical, file("c", kind="cdf", version=2),
        file("r", kind="remove", version=3), end()], version=1))
    result = make_client(handler).changes(TABLE, starting_version=1, ending_version=3, include_historical_metadata=True)
    assert [type(f) for f in result.files] == [AddFile, CdfFile, RemoveFile]
    assert [f.id for f in result.adds] == ["a"] and [f.id for f in result.cdfs] == ["c"] and len(result.removes) == 1
    assert [m.version for m in result.historical_metadata] == [2] and isinstance(result.historical_metadata[0], Metadata)
    request = seen[0]
    assert request.method == "GET" and request.url.path.endswith("/tables/t/changes")
    assert dict(request.url.params) == {"startingVersion": "1", "endingVersion": "3", "includeHistoricalMetadata": "true",
                                        "includeHistoricalProtocol": "true"}  # fmt: skip
    assert request.headers["delta-sharing-capabilities"] == ASKED


MAY_1_NOON = 1_714_564_800_000  # 2024-05-01T12:00:00Z: inside the range asked for


def test_changes_by_timestamp_and_pages(make_client: Make) -> None:
    def page(request: httpx.Request) -> httpx.Response:
        token = request.url.params.get("pageToken")
        if token is None:
            return ndjson([protocol(), metadata(), file("a", kind="add", timestamp=MAY_1_NOON), end(nextPageToken="n2")])
        return ndjson([protocol(), metadata(), file("b", kind="cdf", timestamp=MAY_1_NOON), end()])

    seen, handler = recorder(page)
    result = make_client(handler).changes(TABLE, starting_timestamp="2024-05-01T00:00:00Z",
                                          ending_timestamp="2024-05-02", max_files=1)
    assert [f.id for f in result.files] == ["a", "b"] and result.pages == 2
    assert dict(seen[1].url.params) == {"startingTimestamp": "2024-05-01T00:00:00Z",
                                        "endingTimestamp": "2024-05-02T00:00:00Z", "maxFiles": "1", "pageToken": "n2"}


def test_a_snapshot_file_in_a_change_feed_is_refused(make_client: Make) -> None:
    _seen, handler = recorder(ndjson([protocol(), metadata(), file("a"), end()]))
    with pytest.raises(ProtocolViolation, match="unexpected file line"):
        make_client(handler).changes(TABLE, starting_version=0)


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"starting_version": 1, "starting_timestamp": "2024-01-01"},
     {"starting_version": 1, "ending_version": 2, "ending_timestamp": "2024-01-01"}],
)
def test_changes_needs_one_start_and_at_most_one_end(make_client: Make, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        make_client(lambda r: httpx.Response(500)).changes(TABLE, **kwargs)
