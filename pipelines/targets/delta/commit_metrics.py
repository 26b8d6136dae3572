"""What a job did to its target, read from the Delta commits it made.

Both Sail and Delta Lake on Apache Spark record MERGE/WRITE/DELETE row counts in each commit's
``commitInfo.operationMetrics``; reading them is free, where counting rows would cost a scan
of the target. A job that changed nothing makes no commit on Sail. The jobs say what they
committed (:class:`~sharesync.pipelines.targets.port.Written`); :func:`applied` counts it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.facts import S, Tally, Written
from sharesync.sync.core.location import Location

__all__ = ["WRITES", "Commit", "applied", "commit_metrics", "total", "version_after"]

# A DataFrame save is "WRITE" on Delta Lake/Spark; Sail calls the one that creates a table "CREATE TABLE".
WRITES = ("WRITE", "CREATE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE")


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


def applied(written: Written[S]) -> S:
    """What a job's commits did: ``written.known`` completed from the commits after ``written.before``."""
    known = written.known
    if written.target is None:
        return known
    commits = commit_metrics(written.target, written.before)
    counted = dataclasses.replace(known, target_version=version_after(written.before, commits))
    match written.tally:
        case Tally.WRITTEN:
            return dataclasses.replace(counted, inserted=total(commits, WRITES, "numOutputRows"))
        case Tally.DELETED:
            return dataclasses.replace(counted, deleted=total(commits, "DELETE", "numDeletedRows"))
        case Tally.MERGED:
            inserted = total(commits, "MERGE", "numTargetRowsInserted")
            updated = total(commits, "MERGE", "numTargetRowsUpdated")
            deleted = total(commits, "MERGE", "numTargetRowsDeleted")
            soft = written.soft_deleted
            if soft and updated:  # the metrics count the soft-delete clause as updates
                updated, deleted = updated - soft, deleted + soft
            return dataclasses.replace(counted, inserted=inserted, updated=updated, deleted=deleted)
    return counted
