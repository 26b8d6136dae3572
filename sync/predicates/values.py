"""Typed values from their protocol text forms: partition values and temporal strings.

The sync reuses :func:`parse_partition_value` to add typed partition columns, and
pruning uses it to compare a file's partition values with literals, so both read the
protocol's "Partition Value Serialization" rules the same way.
"""

from __future__ import annotations

import struct
from contextlib import suppress
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.predicates.types import Kind, kind_of


def parse_partition_value(raw: str | None, type_name: str) -> Any:
    """The typed value of one partition value string (None for a null partition value).

    Spec ("Partition Value Serialization"): an empty string or null is a null value for every
    type; numbers are their string form; dates ``YYYY-MM-DD``; timestamps
    ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (taken as UTC; the ISO form ``…T…Z`` that newer Delta
    writers use is accepted too); booleans ``true``/``false``. Float columns round to float32,
    as the engine reading the partition column does. Raises ProtocolViolation on a value
    that does not fit its type.
    """
    if raw is None or raw == "":
        return None
    try:
        return _parse(raw, type_name)
    except (ValueError, KeyError, ArithmeticError):  # InvalidOperation and OverflowError included
        raise ProtocolViolation(f"partition value {raw!r} is not a valid {type_name}") from None


def _parse(raw: str, type_name: str) -> Any:
    match kind_of(type_name):
        case Kind.STRING:
            return raw
        case Kind.INTEGRAL:
            return int(raw)
        case Kind.DOUBLE:
            return float(raw)  # also "NaN", "Infinity", "-Infinity" (Java's spelling)
        case Kind.FLOAT:
            return to_float32(float(raw))
        case Kind.DECIMAL:
            return Decimal(raw)
        case Kind.BOOLEAN:
            return {"true": True, "false": False}[raw.strip().lower()]
        case Kind.DATE:
            return date.fromisoformat(raw)
        case Kind.TIMESTAMP:
            return parse_instant(raw)
        case Kind.TIMESTAMP_NTZ:
            return parse_wall_clock(raw)
    if type_name.strip().lower() == "binary":
        return raw.encode("latin-1")  # Delta escapes binary partition values one character per byte
    raise ProtocolViolation(f"partition columns of type {type_name!r} are not supported (value {raw!r})")


def parse_instant(text: str) -> datetime:
    """An aware UTC datetime from ISO-8601 text; text without an offset is taken as UTC."""
    parsed = _fromisoformat(text)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_wall_clock(text: str) -> datetime:
    """A naive datetime (``timestamp_ntz``) from ISO-8601 text; an offset is an error."""
    parsed = _fromisoformat(text)
    if parsed.tzinfo is not None:
        raise ValueError(f"{text!r} has a time zone offset, but timestamp_ntz values have none")
    return parsed


def _fromisoformat(text: str) -> datetime:
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    return datetime.fromisoformat(cleaned)


def to_float32(value: float) -> float:
    """The float32 value nearest to ``value``, as a Python float (OverflowError if too large)."""
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def float32_text(value: float) -> str:
    """The shortest decimal text that reads back as the same float32 (``0.1``, not ``0.10000000149011612``)."""
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        with suppress(OverflowError):  # near the float32 maximum, a short spelling may round past it
            if to_float32(float(text)) == value:
                return text
    return repr(value)
