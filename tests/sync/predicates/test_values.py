"""Partition value strings → typed values (spec: "Partition Value Serialization")."""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.predicates import parse_partition_value
from sharesync.sync.predicates.values import float32_text, to_float32


@pytest.mark.parametrize(
    ("raw", "type_name", "expected"),
    [
        (None, "long", None),
        ("", "long", None),  # an empty string is null for every type
        ("", "string", None),
        ("abc", "string", "abc"),
        (" padded ", "string", " padded "),
        ("42", "integer", 42),
        ("-7", "byte", -7),
        ("9223372036854775807", "long", 2**63 - 1),
        ("1.5", "double", 1.5),
        ("-Infinity", "double", -math.inf),
        ("0.1", "float", to_float32(0.1)),  # what a float column holds
        ("1.50", "decimal(5,2)", Decimal("1.50")),
        ("true", "boolean", True),
        ("FALSE", "boolean", False),
        ("1970-01-01", "date", date(1970, 1, 1)),
        ("1970-01-01 00:00:00", "timestamp", datetime(1970, 1, 1, tzinfo=UTC)),
        ("2021-04-28 23:33:48.719123", "timestamp", datetime(2021, 4, 28, 23, 33, 48, 719123, tzinfo=UTC)),
        ("2021-04-28T23:33:48.719Z", "timestamp", datetime(2021, 4, 28, 23, 33, 48, 719000, tzinfo=UTC)),
        ("2021-04-28 23:33:48", "timestamp_ntz", datetime(2021, 4, 28, 23, 33, 48)),
        ("\x01\x02", "binary", b"\x01\x02"),
    ],
)
def test_parse_partition_value(raw: str | None, type_name: str, expected: Any) -> None:
    value = parse_partition_value(raw, type_name)
    assert value == expected and type(value) is type(expected)


def test_nan_partition_value() -> None:
    assert math.isnan(parse_partition_value("NaN", "double"))


@pytest.mark.parametrize(
    ("raw", "type_name"),
    [
        ("x", "long"),
        ("1.5", "integer"),
        ("maybe", "boolean"),
        ("2021-13-01", "date"),
        ("yesterday", "timestamp"),
        ("2021-01-01T00:00:00+02:00", "timestamp_ntz"),
        ("abc", "decimal(5,2)"),
        ("1e39", "float"),
        ("x", "map"),
    ],
)
def test_bad_partition_values_are_protocol_violations(raw: str, type_name: str) -> None:
    with pytest.raises(ProtocolViolation, match=re.escape(type_name)):
        parse_partition_value(raw, type_name)


@pytest.mark.parametrize("value", [0.1, 1.5, 3.4028234663852886e38, 1e-45, -2.5e-8, 0.0, 16777217.0])
def test_float32_text_reads_back_to_the_same_float32(value: float) -> None:
    single = to_float32(value)
    assert to_float32(float(float32_text(single))) == single
    assert len(float32_text(single)) <= 13
