"""The protocol a sync mode implements: what the batch runner asks a table's mode, once per batch.

A mode owns what differs between modes — how its batches are staged, prepared and written, what
it reports (:class:`TargetChanges`), which columns carry its high-water mark, what its target
holds — and the run asks it through :class:`ModeStrategy` instead of branching on the mode. The
registry (:mod:`sharesync.pipelines.modes.registry`) maps a table to its strategy;
docs/adding-a-mode-or-target-format.md walks through adding one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, Self

from sharesync.pipelines.targets.facts import ApplyStats
from sharesync.state import Checkpoint
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.planning.sync_plan import BootstrapReason, VersionRange
from sharesync.sync.predicates import Expr

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

Spark = Callable[[], "SparkSession"]

# Bootstraps that move the rows a target keeps into the snapshot's schema first (append, history).
CONFORMS = (BootstrapReason.SCHEMA_CHANGED, BootstrapReason.KEPT)


class TargetChanges(Protocol):
    """What batches did to the target, in the terms of the table's mode (summed over batches)."""

    def __add__(self, other: Self, /) -> Self: ...

    def counts(self) -> dict[str, int]:
        """The mode's counters under names that say what they count (Dagster metadata keys)."""
        ...

    def describe(self, *, compact: bool = False) -> str:
        """In words for logs and the Dagster run summary; ``compact``: a cell of the CLI's results
        table (80 columns, at most two lines)."""
        ...


@dataclass(frozen=True)
class Applied:
    """A batch written: the target rows the job reports and the mode's own account of them."""

    stats: ApplyStats
    changes: TargetChanges


@dataclass(frozen=True, kw_only=True)
class BootstrapAt:
    """The snapshot a bootstrap applies: its version, its commit time (None: unknown), for a
    full-refresh backfill in history mode the version history is rewritten from, and in append
    mode the version up to which the target's rows stay (a reset or refreshed log)."""

    version: int
    committed: datetime | None = None
    replay_from: int | None = None
    keep_after: int | None = None


@dataclass(frozen=True, kw_only=True)
class BatchJob:
    """One staged batch and where it goes: what every mode's write is given."""

    spark: Spark
    table: TableConfig
    target: Location
    staged: Location
    expr: Expr | None  # the user's filter, as a predicate tree
    rewrite_threshold: float | None
    record: str | None = None  # the batch's commit record (pipelines/targets/delta/commit_record.py)
    deletion_vectors: bool = True  # a target this batch creates is merge-on-read

    @property
    def row_filter(self) -> Column | None:
        """The filter as a Spark column, for the jobs that filter in Spark."""
        if self.expr is None:
            return None
        from sharesync.sync.predicates import to_spark

        return to_spark(self.expr)


class ModeStrategy(Protocol):
    """A sync mode, as the run, the checks and the CLI ask it (docs/adding-a-mode-or-target-format.md)."""

    # Staging: net a batch of changes per key while it downloads (only the net change is written).
    nets_by_key: bool
    # Staging: a bootstrap's files are kept as downloaded (only the engine reads them), not re-encoded.
    direct_snapshot: bool
    # Fetching: a snapshot is asked for at its version, so its files date the rows (rows open at it).
    dated_snapshot: bool
    # The target holds one current row per key (key uniqueness is checked, verify compares keys).
    keyed: bool
    # The target's live rows are a copy of the source's (row counts and verify --full compare them).
    copies_source: bool
    # The target's flag column of its current rows (None: every row is current).
    current_flag: str | None
    # The columns whose maximum is the newest source version the target's rows carry.
    high_water_columns: tuple[str, ...]
    # What only the target holds, in words ("change log", "history"); None: the provider can give
    # the rows again, so the target may be rebuilt or converted.
    keeps: str | None

    def describe_table(self, table: TableConfig) -> str:
        """How the target is kept, completing "kept in sync with the Delta table at T ..."."""
        ...

    def no_changes(self) -> TargetChanges:
        """The account of nothing done: the zero that batches' accounts add to."""
        ...

    def history_start(self, target: Location) -> int | None:
        """Where the target's own history starts, for a backfill from before it (None: no history)."""
        ...

    def bootstrap(
        self, job: BatchJob, *, reason: BootstrapReason, checkpoint: Checkpoint | None, snapshot: BootstrapAt
    ) -> Applied:
        """Make the target the staged snapshot, in the mode's terms."""
        ...

    def changes(self, job: BatchJob, *, batch: VersionRange, replay_from: int | None) -> Applied:
        """Apply a staged batch of changes (``replay_from``: a backfill re-applies from there)."""
        ...
