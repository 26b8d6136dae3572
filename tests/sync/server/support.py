"""Helpers shared by the server tests: NDJSON parsing through the shared wire models, error bodies."""

from __future__ import annotations

import json
from typing import Any

import httpx

from sharesync.sync.protocol.wire import Action, parse_action

END_STREAM = {"delta-sharing-capabilities": "responseformat=parquet;includeendstreamaction=true"}
ORDERS = "/shares/demo/schemas/sales/tables/orders"


def actions(response: httpx.Response) -> list[Action]:
    """Every NDJSON line of a 200 response, validated by the shared wire models."""
    assert response.status_code == 200, response.text
    return [parse_action(line) for line in response.text.splitlines()]


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    """The JSON error body of a response that must have ``status``."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = json.loads(response.text)
    return body
