"""The spec's own JSON examples, kept as fixture files, must parse (httpx runs WHATWG's corpus this way)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.protocol.ndjson import parse_lines
from sharesync.sync.protocol.wire import (
    ACTION_KEYS,
    AddFile,
    CdfFile,
    EndStreamAction,
    ErrorBody,
    File,
    GetShareResponse,
    ListSchemasPage,
    ListSharesPage,
    ListTablesPage,
    Metadata,
    Protocol,
    RemoveFile,
    parse_action,
)

from .conftest import FIXTURES

ACTION_FIXTURES = {
    "action_protocol.json": Protocol,
    "action_metadata.json": Metadata,
    "action_metadata_extra_fields.json": Metadata,
    "action_file.json": File,
    "action_add.json": AddFile,
    "action_cdf.json": CdfFile,
    "action_remove.json": RemoveFile,
    "action_end_stream.json": EndStreamAction,
    "action_end_stream_error.json": EndStreamAction,
}
LISTING_FIXTURES = {
    "list_shares.json": ListSharesPage,
    "list_shares_last_page_empty_token.json": ListSharesPage,
    "list_shares_no_items.json": ListSharesPage,
    "list_schemas.json": ListSchemasPage,
    "list_tables.json": ListTablesPage,
    "list_all_tables.json": ListTablesPage,
    "get_share.json": GetShareResponse,
}
NDJSON_FIXTURES = {
    "metadata.ndjson": [Protocol, Metadata],
    "query.ndjson": [Protocol, Metadata, File, File],
    "changes.ndjson": [Protocol, Metadata, AddFile, CdfFile, RemoveFile],
}


def test_every_fixture_file_is_checked() -> None:
    known = set(ACTION_FIXTURES) | set(LISTING_FIXTURES) | set(NDJSON_FIXTURES) | {"profile_v1.share"}
    known |= {p.name for p in FIXTURES.glob("error_*.json")}
    assert {p.name for p in FIXTURES.iterdir()} == known


def test_every_action_kind_has_an_example() -> None:
    assert {ACTION_KEYS[next(iter(json.loads((FIXTURES / n).read_text())))] for n in ACTION_FIXTURES} == set(
        ACTION_KEYS.values()
    )


@pytest.mark.parametrize("name", sorted(ACTION_FIXTURES))
def test_action_examples_parse(name: str) -> None:
    text = (FIXTURES / name).read_text()
    action = parse_action(json.dumps(json.loads(text)))  # one line, as on the wire
    assert isinstance(action, ACTION_FIXTURES[name])


@pytest.mark.parametrize("name", sorted(LISTING_FIXTURES))
def test_listing_examples_parse(name: str) -> None:
    page = LISTING_FIXTURES[name].model_validate_json((FIXTURES / name).read_text())
    if isinstance(page, GetShareResponse):
        assert page.share.name == "vaccine_share"
    else:
        assert all(item.name for item in page.items or [])


@pytest.mark.parametrize("name", sorted(NDJSON_FIXTURES))
def test_ndjson_examples_parse_as_streams(name: str) -> None:
    raw = (FIXTURES / name).read_bytes()
    chunks = [raw[i : i + 7] for i in range(0, len(raw), 7)]  # lines split across chunks
    actions = list(parse_lines(chunks, context=name))
    assert [type(a) for a in actions] == NDJSON_FIXTURES[name]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("error_*.json")), ids=lambda p: p.name)
def test_error_examples_parse(path: Path) -> None:
    body = ErrorBody.model_validate_json(path.read_text())
    assert body.error_code


def test_metadata_example_says_cdf_enabled() -> None:
    action = parse_action((FIXTURES / "action_metadata.json").read_text())
    assert isinstance(action, Metadata) and action.cdf_enabled and action.partition_columns == ["date"]


def test_file_repr_hides_the_presigned_url() -> None:
    action = parse_action((FIXTURES / "action_file.json").read_text())
    assert "X-Amz-Signature" not in repr(action) and "X-Amz-Signature" not in str(action)


@pytest.mark.parametrize(
    "line",
    [
        '{"protocol":{"minReaderVersion":1},"protocol":{"minReaderVersion":2}}',
        '{"protocol":{"minReaderVersion":1},"metaData":{"id":"x","schemaString":"{}"}}',
        '{"file":{"id":"no-url","size":1}}',
        "[1, 2]",
        "not json",
        "{}",
    ],
    ids=["doubled key", "two actions", "missing field", "not an object", "not json", "no action"],
)
def test_bad_lines_are_protocol_violations(line: str) -> None:
    with pytest.raises(ProtocolViolation):
        parse_action(line)


def test_a_line_of_unknown_actions_is_skipped() -> None:
    # Was a ProtocolViolation: unknown actions come from newer servers (forward compatibility).
    assert parse_action('{"queryStatus":{"queryId":"q"}}') is None
    action = parse_action('{"protocol":{"minReaderVersion":1},"newThing":{"a":1}}')
    assert isinstance(action, Protocol) and action.min_reader_version == 1
