"""The base of every config model, and the cron rule the schedules share."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["StrictModel", "validate_cron"]


class StrictModel(BaseModel):
    """Frozen, and an unknown field is an error (a misspelt option must not be ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def validate_cron(value: str | None) -> str | None:
    """``value`` when it is a five-field cron expression (None passes through)."""
    if value is None:
        return None
    from croniter import croniter  # imported lazily: only configs with schedules pay for it

    if not croniter.is_valid(value):
        raise ValueError(f"'{value}' is not a valid cron expression (five fields, e.g. '*/15 * * * *')")
    return value
