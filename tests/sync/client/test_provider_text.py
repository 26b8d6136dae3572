"""Text a provider chooses reaches people only on one line and without terminal escapes.

An error message, an ``endStreamAction.errorMessage`` or a table name may hold line breaks
(a forged second ``error:`` line), ANSI escape sequences (a cleared or recoloured terminal) or
bidi overrides (text shown in another order than it reads): every sharesync message writes
them as escapes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sharesync.sync.core.errors import BadRequest, StreamError, printable
from sharesync.sync.protocol.client import SharingClient

from .conftest import end, error, metadata, ndjson, protocol

HOSTILE = "bad table\nerror: rel.s.other: forged line\x1b[2J\u202eevil"
SHOWN = r"bad table\nerror: rel.s.other: forged line\x1b[2J\u202eevil"


def test_printable_escapes_control_and_format_characters_only() -> None:
    assert printable(HOSTILE) == SHOWN
    assert printable("café — 10 % … naïve") == "café — 10 % … naïve"


def test_a_providers_error_message_stays_on_one_line(make_client: Callable[..., SharingClient]) -> None:
    client = make_client(lambda request: error(400, "INVALID_PARAMETER_VALUE", HOSTILE))
    with pytest.raises(BadRequest) as info:
        client.metadata("share.schema.t")
    assert SHOWN in str(info.value) and "\n" not in str(info.value) and "\x1b" not in str(info.value)


def test_an_error_message_in_the_stream_stays_on_one_line(make_client: Callable[..., SharingClient]) -> None:
    client = make_client(lambda request: ndjson([protocol(), metadata(), end(errorMessage=HOSTILE)]))
    with pytest.raises(StreamError) as info:
        client.query("share.schema.t")
    assert SHOWN in str(info.value) and "\n" not in str(info.value)
