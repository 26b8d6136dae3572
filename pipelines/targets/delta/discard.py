"""Remove a target on request (``sharesync reset NAME --discard-target``), saying what went.

A change log or a row history cannot be rebuilt from the provider, so no command removes one
unless told to; this is the one place that does, for a table sharesync wrote only.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.pipelines.targets.guard_columns import feed_only_layout, written_by_sharesync
from sharesync.pipelines.targets.delta.identity import read_identity
from sharesync.pipelines.targets.delta.stats import row_count
from sharesync.sync.core.config import Mode
from sharesync.sync.core.errors import TargetError
from sharesync.sync.core.location import Location

__all__ = ["Discarded", "discard_target"]

_WHAT = {Mode.APPEND: "its append-mode change log", Mode.HISTORY: "its history-mode row history"}


@dataclass(frozen=True)
class Discarded:
    target: str
    rows: int
    layout: Mode | None  # append or history; None: a merge or snapshot table

    def describe(self) -> str:
        what = _WHAT[self.layout] if self.layout is not None else "a merge- or snapshot-mode table"
        return f"target {self.target} removed ({self.rows} rows of {what})"


def discard_target(target: Location) -> Discarded | None:
    """Remove the Delta table sharesync wrote at ``target``; None when there is none."""
    found = read_identity(target)
    if found is None:
        return None
    if not written_by_sharesync(found.columns):
        raise TargetError(
            f"target '{target.uri}' is a Delta table that was not written by sharesync; sharesync will not "
            "remove it (remove it yourself if its data may go)"
        )
    rows = row_count(target)
    target.remove()
    return Discarded(target.uri, rows, feed_only_layout(found.columns))
