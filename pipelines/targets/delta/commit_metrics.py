"""What a job did to its target, read from the Delta commits it made.

Both Sail and Delta Lake on Apache Spark record MERGE/WRITE/DELETE row counts in each commit's
``commitInfo.operationMetrics``; reading them is free, where counting rows would cost a scan
of the target. A job that changed nothing makes no commit on Sail.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sharesync.pipelines.targets.delta.open import open_target
from sharesync.sync.core.location import Location

__all__ = ["WRITES", "ApplyStats", "Commit", "commit_metrics", "total", "version_after"]

# A DataFrame save is "WRITE" on Delta Lake/Spark; Sail calls the one that creates a table "CREATE TABLE".
WRITES = ("WRITE", "CREATE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE")


@dataclass(frozen=True)
class ApplyStats:
    """What one job did to the target, as shown to users.

    ``rows_in_batch``: change rows staged (before netting and filtering). ``inserted``,
    ``updated``, ``deleted``: target rows; a soft delete counts as deleted, a replace counts the
    rows it removed as deleted. ``target_version``: the target's Delta version afterwards, or
    ``None`` when there is no table (or an empty batch gave no reason to look).
    ``added_columns``: columns the target gained from an additive schema change.
    """

    rows_in_batch: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    target_version: int | None = None
    added_columns: tuple[str, ...] = ()

    @property
    def changed_rows(self) -> int:
        return self.inserted + self.updated + self.deleted


class Commit(NamedTuple):
    version: int
    operation: str  # commitInfo.operation: "MERGE", "WRITE", "DELETE", …
    metrics: dict[str, Any]  # commitInfo.operationMetrics


def commit_metrics(target: Location, after_version: int | None) -> list[Commit]:
    """The commits of the Delta table at ``target`` newer than ``after_version``, oldest first."""
    table = open_target(target)
    newest = table.version()
    start = -1 if after_version is None else after_version
    if newest <= start:
        return []
    commits = [
        Commit(int(c["version"]), str(c.get("operation", "")), dict(c.get("operationMetrics") or {}))
        for c in table.history(newest - start)
        if int(c["version"]) > start
    ]
    return sorted(commits)


def total(commits: Sequence[Commit], operations: str | Sequence[str], metric: str) -> int:
    """Sum one ``operationMetrics`` entry over the commits of the given operation(s)."""
    ops = (operations,) if isinstance(operations, str) else tuple(operations)
    return sum(int(c.metrics.get(metric) or 0) for c in commits if c.operation in ops)


def version_after(before: int | None, commits: Sequence[Commit]) -> int | None:
    """The target's version after a job: its last commit, or unchanged if it made none."""
    return commits[-1].version if commits else before
