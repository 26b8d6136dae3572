"""A target before a job touches it, and the two refusals every format makes on it.

Format-neutral and pure: the format's inspection fills a :class:`TargetState`
(:meth:`~sharesync.pipelines.targets.port.TargetFormat.inspect`), the jobs and the run judge it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sharesync.pipelines.targets.guard_columns import written_by_sharesync
from sharesync.sync.core.errors import TargetError
from sharesync.sync.core.location import Location

__all__ = ["TargetState", "require_columns", "require_replaceable"]


@dataclass(frozen=True)
class TargetState:
    """A target before a job touches it. ``version is None``: no table there yet."""

    location: Location  # where it is, reached with the config's storage settings
    version: int | None
    schema: dict[str, Any] | None  # Spark/Delta JSON struct schema, None when no table yet

    @property
    def path(self) -> str:
        """What the engine writes to: a local path or the object-store URI."""
        return self.location.uri

    @property
    def exists(self) -> bool:
        return self.version is not None

    @property
    def column_names(self) -> list[str]:
        return [field["name"] for field in (self.schema or {}).get("fields", [])]


def require_columns(state: TargetState, needed: Sequence[str], mode: str) -> None:
    """A target sharesync did not write (or wrote in another mode) is refused, not mangled."""
    missing = [c for c in needed if c not in state.column_names]
    if missing:
        raise TargetError(
            f"target '{state.path}' is a Delta table without {', '.join(missing)}, so it was not written by "
            f"sharesync in '{mode}' mode; point 'target' at a new path, or run 'sharesync reset' for this table to rebuild it"
        )


def require_replaceable(state: TargetState) -> None:
    """Replacing a table sharesync wrote (any mode) is the reset and rebuild path; replacing
    someone else's Delta table that happens to sit at the target would destroy their data."""
    if not written_by_sharesync(state.column_names):
        raise TargetError(
            f"target '{state.path}' is a Delta table that was not written by sharesync; sharesync will not "
            "replace it. Point 'target' at a new path, or remove that table if its data may go"
        )
