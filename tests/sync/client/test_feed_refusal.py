"""A server's refusal of a table's change data feed is told apart from lost history (issue 40 §1.2):
the first re-plans without changes (and fails an append or history table), the second re-bootstraps."""

from __future__ import annotations

import json

import httpx
import pytest

from sharesync.sync.core.errors import BadRequest, ChangeFeedRefused, HistoryUnavailable
from sharesync.sync.protocol.http_errors import error_from_parts


def _error(message: str, code: str | None = "INVALID_PARAMETER_VALUE", status: int = 400) -> Exception:
    body = json.dumps({"errorCode": code, "message": message}).encode()
    return error_from_parts(status, httpx.Headers(), body, context="changes of s.d.t")


@pytest.mark.parametrize(
    "message",
    [
        "cdf is not enabled on table s.d.t",  # reference server (and the local one): history not shared
        "Reading table by version or timestamp is not supported because change data feed is not enabled on table: t",
        "Reading table by version or timestamp is not supported because history sharing is not enabled on table: t",
    ],
)
def test_the_reference_servers_refusals_are_a_refused_feed(message: str) -> None:
    error = _error(message)
    assert isinstance(error, ChangeFeedRefused) and error.server_message == message


@pytest.mark.parametrize(
    ("message", "code", "status", "kind"),
    [
        ("cdf is not enabled on table s.d.t", "INTERNAL_ERROR", 400, BadRequest),  # another code: not it
        ("cdf is not enabled on table s.d.t", "INVALID_PARAMETER_VALUE", 500, Exception),  # an outage
        ("Version 3 of table t is not available: the earliest available version is 5", None, 400, HistoryUnavailable),
        ("maxFiles must be positive.", "INVALID_PARAMETER_VALUE", 400, BadRequest),
    ],
)
def test_other_errors_are_not_a_refused_feed(message: str, code: str | None, status: int, kind: type) -> None:
    error = _error(message, code, status)
    assert not isinstance(error, ChangeFeedRefused) and isinstance(error, kind)
