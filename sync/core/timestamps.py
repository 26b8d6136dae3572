"""Timestamps: accept what users type, send what the protocol wants.

The protocol's Timestamp Format is ISO-8601 in UTC with a ``Z`` (``2022-01-01T00:00:00Z``).
Users write dates, offsets (``+02:00``) or naive times (taken as UTC); all are normalised
to aware UTC datetimes here, once.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from sharesync.sync.core.errors import ConfigError


def parse_timestamp(value: object) -> datetime:
    """An aware UTC datetime from a datetime, a date, epoch milliseconds or an ISO-8601 string."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, date):
        parsed = datetime(value.year, value.month, value.day)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"'{value}' is not an ISO-8601 timestamp; write e.g. '2024-01-01T00:00:00Z' or '2024-01-01'"
            ) from None
    else:
        raise ValueError(f"expected an ISO-8601 timestamp string, got {type(value).__name__}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def given_timestamp(where: str, value: str) -> datetime:
    """:func:`parse_timestamp` of a timestamp a person gave (a CLI option, a run config field):
    a bad one is a :class:`ConfigError` naming ``where``, so it fails as a usage error."""
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def to_wire(value: datetime | str) -> str:
    """The protocol's form: ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` in UTC."""
    moment = parse_timestamp(value)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return text + "Z"


def from_millis(millis: int) -> datetime:
    return datetime.fromtimestamp(millis / 1000, tz=UTC)


def to_millis(moment: datetime) -> int:
    return int(parse_timestamp(moment).timestamp() * 1000)
