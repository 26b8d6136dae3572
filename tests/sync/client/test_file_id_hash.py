"""The ``fileidhash`` header (spec "File ID Hash Header"): sent only when configured, echo verified.

sharesync pairs a deletion-vector commit's ``remove`` and ``add`` of one data file, and downloads
each data file once per batch, by file id; asking for a scheme pins what the ids mean. The spec's
client rule: a missing or different echo is an error. The server side, over real HTTP, is in
tests/sync/server/test_file_id_hash.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from sharesync.sync.core.errors import ProtocolViolation

from .conftest import end, file, metadata, ndjson, protocol
from .test_streams import recorder

ANSWER = [protocol(), metadata(), file("a"), end()]


@pytest.mark.parametrize("call", ["query", "changes"])
def test_the_header_is_sent_and_its_echo_accepted(make_client: Any, call: str) -> None:
    lines = ANSWER if call == "query" else [protocol(), metadata(), file("a", kind="add"), end()]
    seen, handler = recorder(ndjson(lines, version=5 if call == "query" else 1, headers={"fileidhash": "delta"}))
    client = make_client(handler, file_id_hash="delta")
    result = client.query("s.sc.t") if call == "query" else client.changes("s.sc.t", starting_version=1)
    assert [f.id for f in result.files] == ["a"]
    assert seen[0].headers["fileidhash"] == "delta"


def test_an_echo_in_other_case_is_the_same_value(make_client: Any) -> None:
    _seen, handler = recorder(ndjson(ANSWER, headers={"fileidhash": "PARQUET"}))
    assert [f.id for f in make_client(handler, file_id_hash="parquet").query("s.sc.t").files] == ["a"]


@pytest.mark.parametrize(
    ("headers", "said"),
    [({}, "did not echo the fileidhash header"), ({"fileidhash": "parquet"}, "echoed fileidhash='parquet'")],
)
def test_a_missing_or_different_echo_is_an_error(make_client: Any, headers: dict[str, str], said: str) -> None:
    seen, handler = recorder(ndjson(ANSWER, headers=headers))
    with pytest.raises(
        ProtocolViolation, match=rf"asked for file ids of scheme fileidhash=delta, but the server {said}"
    ):
        make_client(handler, file_id_hash="delta").query("s.sc.t")
    assert len(seen) == 1  # not retried: the server's answer will not change


def test_no_header_unless_configured(make_client: Any) -> None:
    seen, handler = recorder(ndjson(ANSWER))
    make_client(handler).query("s.sc.t")
    assert "fileidhash" not in seen[0].headers
