"""Decide one table's pass around :func:`plan_sync` — pure, no I/O.

:func:`plan_sync` says which batches bring a checkpoint up to the provider. Before it, a pass
may have to move the checkpoint itself, and after a failed batch it may have to decide again;
those decisions live here, taking frozen facts the run read (checkpoint, provider, what the
target check found, the backfill asked for) and returning what to do, which
:mod:`sharesync.pipelines.run.table_run` carries out:

* :func:`prepare_run` — refuse a foreign target; otherwise the checkpoint moves to make before
  anything is written (a rolled-back target replays from its own high-water mark, a backfill
  rewinds to before its replay, a full refresh to its snapshot version: moved first, the
  checkpoint never claims more than the target holds if the pass crashes), the warnings to
  give, and the :class:`PlanState` to plan from (a lost or replaced target is rebuilt).
* :func:`plan_run` — the plan for that state (:func:`plan_sync`, with the rebuild's warning and
  whether the bootstrap rewrites a history).
* :func:`resume_version` — a checkpoint missing or behind what its target records (a lost or
  older state store): the version to resume from, so nothing is downloaded or applied again.
* :func:`replan` — after the provider's history ran out (``HistoryUnavailable``), it refused the
  change data feed its metadata left unknown (``ChangeFeedRefused``) or a breaking schema change
  on a table set to rebuild: the state to plan again from, at most once per cause; None when that
  cause was already answered (the run then fails).

An append or history target no checkpoint describes, or whose provider table restarted its
versions, is kept or refused as :mod:`~sharesync.sync.planning.kept_target` says.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from sharesync.sync.core.changefeed import ChangeFeed
from sharesync.sync.core.config import Mode
from sharesync.sync.planning.kept_target import (
    Keep,
    KeepRefused,
    LeftTarget,
    continued,
    judge_left,
    judge_restart,
    kept_warning,
)
from sharesync.sync.planning.sync_plan import (
    Bootstrap,
    BootstrapReason,
    CheckpointView,
    PlanOptions,
    SourceView,
    SyncPlan,
    plan_sync,
)


class Finding(StrEnum):
    """What comparing the target with its checkpoint's record found (see ``target_judgement``)."""

    INTACT = "intact"
    UNRECORDED = "unrecorded"
    LOST = "lost"
    REPLACED = "replaced"
    FOREIGN = "foreign"
    ROLLED_BACK = "rolled back"


REBUILT = (Finding.LOST, Finding.REPLACED)
# Bootstraps after the provider's versions restarted (kept_target.judge_restart).
RESTARTS = (BootstrapReason.SOURCE_RECREATED, BootstrapReason.SOURCE_REWOUND)


@dataclass(frozen=True)
class TargetFact:
    """The target check's finding, for a target that is not what its checkpoint recorded."""

    finding: Finding
    target: str
    said: str  # the check's one-sentence description
    # Rolled back (not snapshot mode): the newest source version its rows carry; None: no rows.
    high_water: int | None = None


@dataclass(frozen=True)
class Backfill:
    """A backfill, its timestamps resolved to versions."""

    replay_from: int
    full_refresh: bool = False
    discard: bool = False  # a full refresh of an append target replaces its rows from before it too


@dataclass(frozen=True)
class RunFacts:
    """What one pass read before deciding; ``checkpoint.target_matches``: written for this target and mode."""

    name: str
    mode: Mode
    checkpoint: CheckpointView | None
    source: SourceView
    max_versions_per_batch: int = 100
    target: TargetFact | None = None  # None: the target is what the checkpoint recorded
    backfill: Backfill | None = None
    until_version: int | None = None  # a backfill's end
    history_start: int | None = None  # history mode: the version the target's history starts at
    left: LeftTarget | None = None  # no checkpoint describes the target: the log or history it holds


def wants_high_water(finding: Finding, mode: Mode) -> bool:
    """Whether :attr:`TargetFact.high_water` is needed: a rolled-back target replays from it."""
    return finding is Finding.ROLLED_BACK and mode is not Mode.SNAPSHOT


@dataclass(frozen=True)
class RecordTarget:
    """Put the checkpoint at ``version`` and record the target's identity as it is now."""

    version: int


@dataclass(frozen=True)
class Rewind:
    """Move the checkpoint back to ``version`` (``why``: for the log)."""

    version: int
    why: str


Move = RecordTarget | Rewind


@dataclass(frozen=True)
class PlanState:
    """What planning starts from, after the moves."""

    mode: Mode
    checkpoint: CheckpointView | None
    source: SourceView
    max_versions_per_batch: int
    until_version: int | None
    replay_from: int | None
    refresh_from: int | None  # a backfill that re-bootstraps from this version
    rebuild: TargetFact | None  # the target is rebuilt from a snapshot (lost, replaced, no rows)
    applied: bool = False  # batches of this pass are applied already (a re-plan)
    history_gap: bool = False
    schema_change: str | None = None
    kept: LeftTarget | None = None  # a target without a checkpoint, continued (kept_target)
    restart_keep: int | None = None  # the provider's table restarted: the target's rows up to this stay
    discard: bool = False  # Backfill.discard
    feed_refused: str | None = None  # what the provider said refusing the change data feed

    @property
    def first_sync(self) -> bool:
        """Planned as a first sync from the configured ``start``: nothing to resume from, no refresh."""
        return self.checkpoint is None and self.refresh_from is None and self.kept is None


@dataclass(frozen=True)
class Prepared:
    moves: tuple[Move, ...]
    notices: tuple[str, ...]  # warnings for the result and the next run record
    state: PlanState
    # No batch this pass: record the intact target anew, so the next pass's glance finds it.
    record_if_idle: bool = False


@dataclass(frozen=True)
class Refused:
    """Nothing may be written: the error message."""

    message: str


@dataclass(frozen=True)
class RunPlan:
    plan: SyncPlan
    rewrites_from: int | None = None  # the bootstrap rewrites the target's history from this version
    keep_after: int | None = None  # append: the bootstrap keeps the target's rows up to this version


def prepare_run(facts: RunFacts) -> Prepared | Refused:
    """The checkpoint moves and the planning state of one pass (see the module docstring)."""
    target, mode, view = facts.target, facts.mode, facts.checkpoint
    if target is not None and target.finding is Finding.FOREIGN:
        return Refused(
            f"{target.said}; sharesync will not overwrite it. Move that table elsewhere (the next sync of "
            f"{facts.name} then rebuilds the target from the provider's snapshot), or point 'target' at a new path"
        )
    kept = judge_left(facts.name, mode, facts.left, view, facts.source.version)
    if isinstance(kept, KeepRefused):
        return Refused(kept.message)
    restart = None
    if (target is None or target.finding not in REBUILT) and not (facts.backfill and facts.backfill.discard):
        latest = facts.source.version if facts.until_version is None else min(facts.until_version, facts.source.version)
        restart = judge_restart(facts.name, mode, view, facts.source, latest, facts.backfill is not None)
    if isinstance(restart, KeepRefused):
        return Refused(restart.message)
    if isinstance(kept, Keep) and facts.backfill is not None:
        return Refused(
            f"{facts.name} has no checkpoint and its target holds rows only it has; run 'sharesync sync "
            f"{facts.name}' first (it continues them), then the backfill"
        )
    moves: list[Move] = []
    notices: list[str] = []
    rebuild: TargetFact | None = None
    version = view.version if view is not None else None
    if target is not None and version is not None and target.finding in (*REBUILT, Finding.ROLLED_BACK):
        if target.finding in REBUILT or mode is Mode.SNAPSHOT or target.high_water is None:
            rebuild = target
        else:
            after = replay_checkpoint(mode, target.high_water, version)
            if after < version:  # else its rows reach the checkpoint: nothing to replay
                notices.append(replay_warning(target, after + 1, target.high_water))
            moves.append(RecordTarget(after))  # on record before anything is written, as a backfill does
            version = after
    backfill = facts.backfill
    replay_from = backfill.replay_from if backfill is not None else None
    refresh_from = _refreshes_from(facts)
    # History mode rewinds for a full refresh too: a crash after its bootstrap then leaves a
    # checkpoint from which the next pass replays the rest of the history it removed.
    rewinds = refresh_from is None or mode is Mode.HISTORY
    if replay_from is not None and version is not None and rewinds and mode is not Mode.SNAPSHOT:
        if 1 <= replay_from <= version:  # else nothing applied is replayed (or from the very start)
            moves.append(Rewind(replay_from - 1, f"replaying from version {replay_from}"))
            version = replay_from - 1
    if refresh_from is not None and version is not None and refresh_from < version:
        # The refresh makes the target that snapshot; moved back first, the checkpoint tells the
        # truth whether or not a crash comes before the write.
        moves.append(Rewind(refresh_from, f"full refresh from version {refresh_from}"))
        version = refresh_from
    state = PlanState(
        mode=mode,
        checkpoint=None if view is None or version is None else dataclasses.replace(view, version=version),
        source=facts.source,
        max_versions_per_batch=facts.max_versions_per_batch,
        until_version=facts.until_version,
        replay_from=None if refresh_from is not None else replay_from,
        refresh_from=refresh_from,
        rebuild=rebuild,
        kept=facts.left if isinstance(kept, Keep) else None,
        restart_keep=restart.high_water if isinstance(restart, Keep) else None,
        discard=backfill is not None and backfill.discard,
    )
    intact = target is not None and target.finding is Finding.INTACT and view is not None
    return Prepared(tuple(moves), tuple(notices), state, record_if_idle=intact)


def _refreshes_from(facts: RunFacts) -> int | None:
    """The version a backfill re-bootstraps from: a full refresh, a replay from version 0 and, in
    history mode, a replay from where the target's history starts or earlier (the rows it opened
    there came from a snapshot, which the changes after that version cannot rebuild)."""
    backfill = facts.backfill
    if backfill is None:
        return None
    if backfill.full_refresh or backfill.replay_from == 0:
        return backfill.replay_from
    start = facts.history_start
    if facts.mode is Mode.HISTORY and start is not None and backfill.replay_from <= start:
        return backfill.replay_from
    return None


def plan_run(state: PlanState, start_version: int | None = None) -> RunPlan:
    """The plan for ``state``; ``start_version``: the configured start, resolved (first sync only)."""
    fresh = state.refresh_from is not None and not state.applied
    rebuilding = state.rebuild if not state.applied else None
    view = state.checkpoint
    if fresh:
        view = None  # a full refresh is planned like a first sync, from its own version
    elif view is not None and rebuilding is not None:
        view = dataclasses.replace(view, target_matches=False)  # as for a target new to the config
    options = PlanOptions(
        mode=state.mode,
        max_versions_per_batch=state.max_versions_per_batch,
        start_version=state.refresh_from if state.refresh_from is not None else _first(state, start_version),
        replay_from=state.replay_from,
        until_version=state.until_version,
        history_gap=state.history_gap,
        schema_change=state.schema_change,
        feed_refused=state.feed_refused,
    )
    plan = plan_sync(view, state.source, options)
    if not isinstance(plan, Bootstrap):
        return RunPlan(plan)
    if rebuilding is not None:
        plan = dataclasses.replace(plan, warning=rebuild_warning(rebuilding, state.mode, plan.version))
    if state.restart_keep is not None and plan.reason in RESTARTS:
        said = continued(state.mode, state.restart_keep, plan.version)
        plan = dataclasses.replace(plan, warning=f"{plan.warning}; the target {said}")
        return RunPlan(plan, keep_after=state.restart_keep if state.mode is Mode.APPEND else None)
    kept = state.kept if view is None else None
    if kept is not None:
        warning = kept_warning(state.mode, kept.target, kept.high_water, plan.version)
        plan = dataclasses.replace(plan, reason=BootstrapReason.KEPT, warning=warning)
        return RunPlan(plan, keep_after=kept.high_water if state.mode is Mode.APPEND else None)
    # A full refresh rewrites history from its version (an append log: its rows from there on);
    # a bootstrap the provider's lost history moved elsewhere keeps the history synced before.
    rewrites = fresh and plan.version == state.refresh_from
    keep_after = None
    if rewrites and state.mode is Mode.APPEND and not state.discard and state.refresh_from is not None:
        keep_after = state.refresh_from - 1
    return RunPlan(plan, state.refresh_from if rewrites else None, keep_after)


def _first(state: PlanState, start_version: int | None) -> int | None:
    """The configured start applies to a first sync only (a kept target continues after its rows)."""
    return start_version if state.kept is None else None


def replan(
    state: PlanState,
    checkpoint: CheckpointView | None,
    applied: bool,
    *,
    history_gap: bool = False,
    schema_change: str | None = None,
    feed_refused: str | None = None,
) -> PlanState | None:
    """The state to plan again from after a failed plan (``checkpoint``: as stored now,
    ``applied``: whether batches of this pass got in); None when this cause was answered before."""
    if history_gap and state.history_gap or schema_change is not None and state.schema_change is not None:
        return None
    if feed_refused is not None and state.feed_refused is not None:
        return None
    if not history_gap and schema_change is None and feed_refused is None:
        return None
    source = state.source
    if feed_refused is not None:  # the refusal is the answer the metadata did not give
        source = dataclasses.replace(source, change_feed=ChangeFeed.OFF)
    return dataclasses.replace(
        state,
        checkpoint=checkpoint,
        source=source,
        applied=state.applied or applied,
        history_gap=state.history_gap or history_gap,
        schema_change=state.schema_change if schema_change is None else schema_change,
        feed_refused=state.feed_refused if feed_refused is None else feed_refused,
    )


def replay_checkpoint(mode: Mode, high_water: int, checkpoint_version: int) -> int:
    """The checkpoint version to replay a rolled-back target's changes from.

    Append: after its newest rows (every batch is one commit: the log up to them is whole).
    Merge and history: from its newest rows' version itself — re-applying a version is a no-op
    per key (merge's guards, history's watermarks), and a state restored between two commits of
    one batch is then completed.
    """
    after = high_water if mode is Mode.APPEND else max(high_water - 1, 0)
    return min(after, checkpoint_version)


def rebuild_warning(target: TargetFact, mode: Mode, version: int) -> str:
    """What the run record, the CLI and Dagster say when the target is rebuilt from a snapshot."""
    lost = "was lost" if target.finding is Finding.LOST else target.said.removeprefix(f"target {target.target} ")
    said = f"target {target.target} {lost}; rebuilt from the provider's snapshot at version {version}"
    if mode is Mode.APPEND:
        said += f" (its change history before version {version} is gone)"
    elif mode is Mode.HISTORY:
        said += f" (the history of its rows before version {version} is gone: it starts again there)"
    return said


def replay_warning(target: TargetFact, start: int, high_water: int) -> str:
    return (
        f"{target.said}; its rows reach source version {high_water}, so the provider's changes are "
        f"replayed from version {start}"
    )


# The modes whose rows say which source version last changed them: a target of theirs is resumed
# from them too, when a MERGE (which cannot carry a commit record on Sail) applied the last batches.
ROWS_RECORD = (Mode.MERGE, Mode.HISTORY)


def resume_version(checkpoint: int | None, recorded: int, mode: Mode, high_water: int | None = None) -> int | None:
    """The checkpoint version a target's own record resumes from; None: the checkpoint stands.

    ``recorded``: the source version the target's newest commit record says is applied.
    ``high_water``: merge and history mode (:data:`ROWS_RECORD`), the newest source version their
    rows carry — the MERGE commits after the record cannot carry one on Sail, but the versions in
    their rows are written atomically with them; everything up to it is applied, and re-applying
    it is a no-op per key (:func:`replay_checkpoint`). A checkpoint ahead of its target is the identity check's case:
    this never moves a checkpoint back.
    """
    version = recorded
    if mode in ROWS_RECORD and high_water is not None:
        version = max(version, replay_checkpoint(mode, high_water, high_water))
    if checkpoint is not None and version <= checkpoint:
        return None
    return version


def resume_notice(target: str, checkpoint: int | None, version: int) -> str:
    """What a pass, the run record and ``db recover`` say when the target's record moves the checkpoint."""
    had = "had no checkpoint" if checkpoint is None else f"had the checkpoint at version {checkpoint}"
    return (
        f"the state store {had}; target {target} records source version {version} as applied, "
        f"so syncing resumes from there (nothing downloaded or applied again)"
    )
