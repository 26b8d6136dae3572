"""Remove a target on request (``sharesync reset NAME --discard-target``), saying what went.

A change log or a row history cannot be rebuilt from the provider, so no command removes one
unless told to; this is the one place that does, for a table sharesync wrote only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sharesync.pipelines.targets.delta.identity import read_identity
from sharesync.pipelines.targets.delta.stats import row_count
from sharesync.pipelines.targets.facts import Discarded
from sharesync.pipelines.targets.guard_columns import written_by_sharesync
from sharesync.sync.core.errors import TargetError
from sharesync.sync.core.location import Location

__all__ = ["discard_target"]


def discard_target(target: Location, *, held: Callable[[Sequence[str]], str]) -> Discarded | None:
    """Remove the Delta table sharesync wrote at ``target``; None when there is none. ``held``
    says what a table with these columns holds (the mode registry knows the layouts)."""
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
    return Discarded(target.uri, rows, held(found.columns))
