"""What a target format reports, in words every format can fill: no Delta, no Spark.

The port (:mod:`sharesync.pipelines.targets.port`) returns these; a format's own notions (a Delta
commit's ``operationMetrics``, an Iceberg snapshot's summary) stay inside its implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Generic, TypeVar

from sharesync.pipelines.targets.guard_columns import written_by_sharesync

if TYPE_CHECKING:
    from sharesync.sync.core.location import Location

__all__ = ["RESTORE", "ApplyStats", "Discarded", "Glance", "Tally", "TargetIdentity", "TargetStats", "Written"]

RESTORE = "RESTORE"  # the operation of a commit that rolled the table back (Delta's RESTORE)


class Glance(StrEnum):
    SAME = "same"  # the recorded commit is still the newest
    MISSING = "missing"  # no table at the target
    CHANGED = "changed"  # something else: look closer with the format's identity


@dataclass(frozen=True)
class TargetIdentity:
    """The table at a target as its log describes it."""

    table_id: str  # Delta: metaData.id
    version: int
    columns: tuple[str, ...]
    # The version the newest RESTORE after the asked-for version went back to (-1: by timestamp,
    # not known); None when there was no such RESTORE.
    restored_to: int | None = None

    @property
    def written_by_sharesync(self) -> bool:
        """Whether the table has sharesync's columns (the rule the jobs refuse foreign tables by)."""
        return written_by_sharesync(self.columns)


@dataclass(frozen=True)
class TargetStats:
    version: int
    rows: int  # live rows: soft-deleted ones are not counted
    columns: tuple[tuple[str, str, bool], ...]  # (name, type, nullable)


@dataclass(frozen=True)
class ApplyStats:
    """What one job did to the target, as shown to users.

    ``rows_in_batch``: change rows staged (before netting and filtering). ``inserted``,
    ``updated``, ``deleted``: target rows; a soft delete counts as deleted, a replace counts the
    rows it removed as deleted. ``target_version``: the target's version afterwards, or
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


S = TypeVar("S", bound=ApplyStats)  # what a job counts: ApplyStats, or a mode's richer stats


class Tally(StrEnum):
    """Which of its commits' own numbers complete what a job wrote (the rest it counted itself)."""

    GIVEN = "given"  # none: the job counted everything (a rewrite, a history plan)
    WRITTEN = "written"  # rows written by appends and overwrites, as ``inserted``
    MERGED = "merged"  # a MERGE's rows inserted, updated and deleted
    DELETED = "deleted"  # rows a DELETE removed, as ``deleted``


@dataclass(frozen=True)
class Written(Generic[S]):
    """What a job committed to its target, for the format to count.

    ``before``: the target version its counted commits follow (None: it created the table).
    ``known``: what the job counted itself (rows staged, columns added, and everything
    :attr:`Tally.GIVEN`). ``soft_deleted``: rows a MERGE flagged deleted, which the commit counts
    as updated. ``target is None``: nothing was written, ``known`` is the whole answer.
    """

    known: S
    target: Location | None = None
    before: int | None = None
    tally: Tally = Tally.GIVEN
    soft_deleted: int = 0


@dataclass(frozen=True)
class Discarded:
    """A target removed on request (``sharesync reset NAME --discard-target``)."""

    target: str
    rows: int
    held: str  # what the table was, in its mode's words ("its append-mode change log")

    def describe(self) -> str:
        return f"target {self.target} removed ({self.rows} rows of {self.held})"
