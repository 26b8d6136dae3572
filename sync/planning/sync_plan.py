"""Decide what one sync pass must do for one table — pure, no I/O.

Inputs are what the engine already fetched (the checkpoint, the provider's current version,
table id and CDF flag); the output is one frozen plan, applied by the engine with ``match``:

* :class:`UpToDate`     — nothing new; the engine is never started.
* :class:`Bootstrap`    — copy the snapshot at a version, then (optionally) apply the changes
  after it. Used for the first sync, snapshot mode, and every case where changes cannot be
  trusted: the provider re-created the table (new ``metaData.id``), vacuumed the history we
  need, or (merge mode) publishes no change data feed; when the config moved the table to
  another target or mode than its checkpoint describes; and after a breaking schema change on a
  table set to ``on_breaking_change: rebuild``.
* :class:`ApplyChanges` — apply ``[checkpoint+1 … latest]`` in batches of at most
  ``max_versions_per_batch`` versions; the checkpoint advances after each batch, so a crash
  loses at most one batch of work and never skips one.
* :class:`NoChangeFeed` — nothing is written: an append or history target continues only from
  change rows, and the provider has no change data feed for the table (its metadata says so, or
  it refused the changes). A feed the metadata leaves unknown is asked for as if it were on.

Keeping this pure makes the rules property-testable (see ``tests/sync/test_planning.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sharesync.sync.core.changefeed import ChangeFeed
from sharesync.sync.core.config import Mode


class BootstrapReason(StrEnum):
    FIRST_SYNC = "first sync"
    SNAPSHOT_MODE = "snapshot mode"
    SOURCE_RECREATED = "source table re-created"
    HISTORY_GAP = "history gap"
    NO_CDF = "source has no change data feed"
    SOURCE_REWOUND = "source version went backwards"
    TARGET_CHANGED = "target or mode changed in the config"
    SCHEMA_CHANGED = "breaking schema change, on_breaking_change: rebuild"
    KEPT = "checkpoint reset, the target's rows kept"


@dataclass(frozen=True)
class VersionRange:
    """An inclusive range of source versions applied as one batch."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid version range {self.start}..{self.end}")

    @property
    def size(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True)
class CheckpointView:
    """What planning needs of a stored checkpoint."""

    version: int
    source_table_id: str | None
    # False when the config now names another target or mode than the one the checkpoint
    # describes: the new target holds nothing yet, so it is bootstrapped, never skipped.
    target_matches: bool = True


@dataclass(frozen=True)
class SourceView:
    """What planning needs of the provider's table right now."""

    version: int
    table_id: str | None
    change_feed: ChangeFeed


@dataclass(frozen=True)
class PlanOptions:
    mode: Mode
    max_versions_per_batch: int = 100
    # First sync only: bootstrap from this version instead of the latest (``start: {version: N}``,
    # or a resolved ``start: {timestamp: …}``).
    start_version: int | None = None
    # Backfill: re-apply changes from this version (rows at or after it are overwritten).
    replay_from: int | None = None
    # Backfill: stop at this version instead of the latest.
    until_version: int | None = None
    # Set after the provider answered HistoryUnavailable for the versions we need.
    history_gap: bool = False
    # Set after a batch met a breaking schema change on a table set to ``on_breaking_change: rebuild``:
    # what changed, for the warning.
    schema_change: str | None = None
    # Set after the provider refused the change data feed: what it said, for the warning.
    feed_refused: str | None = None


@dataclass(frozen=True)
class UpToDate:
    version: int


@dataclass(frozen=True)
class Bootstrap:
    version: int
    reason: BootstrapReason
    # Changes after the snapshot (only when bootstrapping from an older version).
    then: tuple[VersionRange, ...] = ()
    warning: str | None = None


@dataclass(frozen=True)
class ApplyChanges:
    batches: tuple[VersionRange, ...]
    # Backfill: target rows whose guard version is at or after this are overwritten by the replay.
    replay_from: int | None = None

    @property
    def start(self) -> int:
        return self.batches[0].start

    @property
    def end(self) -> int:
        return self.batches[-1].end


@dataclass(frozen=True)
class NoChangeFeed:
    """Nothing may be written (see the module docstring): the error message."""

    message: str


SyncPlan = UpToDate | Bootstrap | ApplyChanges | NoChangeFeed

# The modes whose targets hold what only the change feed gives: a change log, a row history.
FEED_ONLY = (Mode.APPEND, Mode.HISTORY)


def split_batches(start: int, end: int, max_versions: int) -> tuple[VersionRange, ...]:
    """Contiguous ranges covering ``start..end`` exactly, each at most ``max_versions`` long."""
    if max_versions < 1:
        raise ValueError("max_versions must be at least 1")
    if end < start:
        return ()
    return tuple(VersionRange(s, min(s + max_versions - 1, end)) for s in range(start, end + 1, max_versions))


def plan_sync(checkpoint: CheckpointView | None, source: SourceView, options: PlanOptions) -> SyncPlan:
    """The one decision procedure for a sync pass (see the module docstring)."""
    latest = source.version if options.until_version is None else min(options.until_version, source.version)
    if source.change_feed is ChangeFeed.OFF and options.mode in FEED_ONLY:
        return NoChangeFeed(no_feed_message(options))  # whatever else changed: never a snapshot as changes

    if checkpoint is None:
        return _first_sync(source, options, latest)

    if not checkpoint.target_matches:
        return Bootstrap(
            latest,
            BootstrapReason.TARGET_CHANGED,
            warning=(
                f"the config names another target or mode than the checkpoint (version {checkpoint.version}) "
                f"describes; bootstrapping the configured target from the snapshot at version {latest}"
            ),
        )

    if recreated(checkpoint, source):
        return Bootstrap(
            latest,
            BootstrapReason.SOURCE_RECREATED,
            warning=(
                f"the provider re-created the table (id {checkpoint.source_table_id} → {source.table_id}); "
                f"re-bootstrapping from its snapshot at version {latest}"
            ),
        )

    if source.version < checkpoint.version:
        return Bootstrap(
            latest,
            BootstrapReason.SOURCE_REWOUND,
            warning=(
                f"the provider's version {source.version} is behind our checkpoint {checkpoint.version}; "
                f"re-bootstrapping from its snapshot at version {latest}"
            ),
        )

    if options.schema_change is not None:
        return Bootstrap(
            latest,
            BootstrapReason.SCHEMA_CHANGED,
            warning=(
                f"breaking schema change at the provider ({options.schema_change}); on_breaking_change is "
                f"'rebuild': re-bootstrapping into a new target version from the snapshot at version {latest}"
            ),
        )

    replay_from = options.replay_from
    first_needed = checkpoint.version + 1 if replay_from is None else min(replay_from, checkpoint.version + 1)
    if replay_from is None and latest <= checkpoint.version:
        return UpToDate(checkpoint.version)

    if options.mode is Mode.SNAPSHOT:
        if latest == checkpoint.version and replay_from is None:
            return UpToDate(checkpoint.version)
        return Bootstrap(latest, BootstrapReason.SNAPSHOT_MODE)

    if source.change_feed is ChangeFeed.OFF:
        return Bootstrap(latest, BootstrapReason.NO_CDF, warning=_no_feed_warning(options, latest))

    if options.history_gap:
        return Bootstrap(
            latest,
            BootstrapReason.HISTORY_GAP,
            warning=(
                f"the provider no longer serves versions from {first_needed}; "
                f"re-bootstrapping from its snapshot at version {latest}"
            ),
        )

    batches = split_batches(first_needed, latest, options.max_versions_per_batch)
    if not batches:
        return UpToDate(checkpoint.version)
    return ApplyChanges(batches, replay_from=replay_from)


def recreated(checkpoint: CheckpointView, source: SourceView) -> bool:
    """Whether the provider's table has another id than the one the checkpoint counted versions of."""
    was, now = checkpoint.source_table_id, source.table_id
    return was is not None and now is not None and was != now


def restarted(checkpoint: CheckpointView, source: SourceView) -> bool:
    """Whether the provider's versions restarted under the checkpoint: its table re-created or rewound."""
    return recreated(checkpoint, source) or source.version < checkpoint.version


def _first_sync(source: SourceView, options: PlanOptions, latest: int) -> SyncPlan:
    start = options.start_version
    if options.replay_from is not None:
        start = options.replay_from if start is None else min(start, options.replay_from)
    if options.history_gap and options.mode is not Mode.SNAPSHOT:
        # The requested start (a version, or a timestamp the provider could no longer resolve)
        # is gone from the provider's history: the latest snapshot is the best there is.
        asked = f"version {start}" if start is not None else "the configured start"
        return Bootstrap(
            latest,
            BootstrapReason.HISTORY_GAP,
            warning=f"{asked} is no longer served; starting from the snapshot at version {latest}",
        )
    if start is None or start >= latest or options.mode is Mode.SNAPSHOT:
        reason = BootstrapReason.SNAPSHOT_MODE if options.mode is Mode.SNAPSHOT else BootstrapReason.FIRST_SYNC
        return Bootstrap(latest, reason)
    if source.change_feed is ChangeFeed.OFF:
        return Bootstrap(latest, BootstrapReason.NO_CDF, warning=_no_feed_warning(options, latest))
    return Bootstrap(
        start,
        BootstrapReason.FIRST_SYNC,
        then=split_batches(start + 1, latest, options.max_versions_per_batch),
    )


def _no_feed(options: PlanOptions) -> str:
    if options.feed_refused is not None:
        return f"the provider refused the table's change data feed ({options.feed_refused})"
    return "the provider does not publish a change data feed for this table"


def _no_feed_warning(options: PlanOptions, latest: int) -> str:
    return (
        f"{_no_feed(options)}; re-bootstrapping from its snapshot at version {latest} (ask the provider "
        "to share the table's history with its change data feed for incremental syncs)"
    )


def no_feed_message(options: PlanOptions) -> str:
    """Why an append or history target is not synced, and what to do."""
    holds = "change log" if options.mode is Mode.APPEND else "row history"
    return (
        f"{_no_feed(options)}, and '{options.mode.value}' mode keeps a {holds} built from it: a snapshot "
        "would land as changes that never happened, so nothing was written. Ask the provider to share the "
        "table with its change data feed, or set 'mode: merge' or 'mode: snapshot' for it"
    )
