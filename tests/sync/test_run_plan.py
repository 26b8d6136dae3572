"""The decisions around a pass's plan — target findings, backfills, re-plans — example- and property-based."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from sharesync.sync.core.changefeed import ChangeFeed
from sharesync.sync.core.config import Mode
from sharesync.sync.planning.kept_target import LeftTarget
from sharesync.sync.planning.run_plan import (
    Backfill,
    Finding,
    PlanState,
    Prepared,
    RecordTarget,
    Refused,
    Rewind,
    RunFacts,
    TargetFact,
    plan_run,
    prepare_run,
    replan,
    resume_version,
)
from sharesync.sync.planning.sync_plan import (
    FEED_ONLY,
    ApplyChanges,
    Bootstrap,
    BootstrapReason,
    CheckpointView,
    NoChangeFeed,
    SourceView,
    SyncPlan,
    UpToDate,
    VersionRange,
    restarted,
)

SOURCE = SourceView(version=10, table_id="t1", change_feed=ChangeFeed.ON)
VERSIONS = st.integers(min_value=0, max_value=30)


def facts(**changes: object) -> RunFacts:
    base: dict[str, object] = {
        "name": "share.schema.t",
        "mode": Mode.MERGE,
        "checkpoint": CheckpointView(8, "t1"),
        "source": SOURCE,
        "max_versions_per_batch": 4,
    }
    return RunFacts(**{**base, **changes})  # type: ignore[arg-type]


def prepared(run: RunFacts) -> Prepared:
    decided = prepare_run(run)
    assert isinstance(decided, Prepared)
    return decided


def rolled_back(high_water: int | None) -> TargetFact:
    return TargetFact(Finding.ROLLED_BACK, "/t", "target /t was rolled back to an older state (…)", high_water)


def test_a_target_as_recorded_plans_as_the_planner_does() -> None:
    decided = prepared(facts())
    assert decided.moves == () and decided.notices == ()
    assert plan_run(decided.state).plan == ApplyChanges((VersionRange(9, 10),))


def test_a_rolled_back_target_replays_from_its_high_water_mark_on_record_first() -> None:
    decided = prepared(facts(target=rolled_back(5)))
    assert decided.moves == (RecordTarget(4),)  # merge re-applies its newest rows' version
    assert decided.notices == (
        "target /t was rolled back to an older state (…); its rows reach source version 5, "
        "so the provider's changes are replayed from version 5",
    )
    assert plan_run(decided.state).plan == ApplyChanges((VersionRange(5, 8), VersionRange(9, 10)))


def test_a_rolled_back_target_without_rows_is_rebuilt_with_a_warning() -> None:
    plan = plan_run(prepared(facts(target=rolled_back(None))).state).plan
    assert isinstance(plan, Bootstrap) and plan.version == 10
    assert plan.warning is not None and "rebuilt from the provider's snapshot at version 10" in plan.warning


def test_a_backfill_rewinds_to_before_its_replay_then_replays() -> None:
    decided = prepared(facts(backfill=Backfill(3)))
    assert decided.moves == (Rewind(2, "replaying from version 3"),)
    assert plan_run(decided.state).plan == ApplyChanges((VersionRange(3, 6), VersionRange(7, 10)), replay_from=3)


def test_a_history_full_refresh_rewinds_and_rewrites_the_history_from_its_version() -> None:
    decided = prepared(facts(mode=Mode.HISTORY, backfill=Backfill(3, full_refresh=True)))
    assert decided.moves == (Rewind(2, "replaying from version 3"),)
    planned = plan_run(decided.state)
    assert planned.plan == Bootstrap(3, BootstrapReason.FIRST_SYNC, then=(VersionRange(4, 7), VersionRange(8, 10)))
    assert planned.rewrites_from == 3


def test_a_replay_from_where_the_history_starts_rebuilds_it() -> None:
    decided = prepared(facts(mode=Mode.HISTORY, backfill=Backfill(4), history_start=5))
    assert decided.state.refresh_from == 4


def test_a_history_gap_replans_as_a_bootstrap_once() -> None:
    state = prepared(facts()).state
    again = replan(state, CheckpointView(8, "t1"), False, history_gap=True)
    assert again is not None
    plan = plan_run(again).plan
    assert isinstance(plan, Bootstrap) and plan.reason is BootstrapReason.HISTORY_GAP
    assert replan(again, CheckpointView(8, "t1"), False, history_gap=True) is None
    assert replan(again, CheckpointView(8, "t1"), False, schema_change="x: int → string") is not None


# ------------------------------------------------------------ properties

checkpoints = st.none() | st.builds(
    CheckpointView, VERSIONS, st.sampled_from(["t1", "t0", None]), target_matches=st.booleans()
)
sources = st.builds(SourceView, VERSIONS, st.sampled_from(["t1", None]), st.sampled_from(ChangeFeed))
targets = st.none() | st.builds(
    TargetFact, st.sampled_from(Finding), st.just("/t"), st.just("target /t …"), st.none() | VERSIONS
)
backfills = st.none() | st.builds(Backfill, VERSIONS, st.booleans(), st.booleans())
lefts = st.none() | st.builds(LeftTarget, st.sampled_from(FEED_ONLY), st.just("/t"), VERSIONS)
run_facts = st.builds(
    RunFacts,
    name=st.just("share.schema.t"),
    mode=st.sampled_from(Mode),
    checkpoint=checkpoints,
    source=sources,
    max_versions_per_batch=st.integers(min_value=1, max_value=5),
    target=targets,
    backfill=backfills,
    until_version=st.none() | VERSIONS,
    history_start=st.none() | VERSIONS,
    left=lefts,
)


def versions(plan: SyncPlan) -> list[int]:
    match plan:
        case UpToDate():
            return []
        case Bootstrap(version=version, then=then):
            return [version, *(r.end for r in then)]
        case ApplyChanges(batches=batches):
            return [r.end for r in batches]
        case NoChangeFeed():
            return []
    raise AssertionError(plan)


def planned(run: RunFacts, start: int | None) -> tuple[Prepared, SyncPlan] | None:
    decided = prepare_run(run)
    if isinstance(decided, Refused):
        return None
    return decided, plan_run(decided.state, start if decided.state.first_sync else None).plan


@given(run_facts, st.none() | VERSIONS)
def test_never_plans_past_the_provider_or_the_backfills_end(run: RunFacts, start: int | None) -> None:
    if (result := planned(run, start)) is None:
        return
    latest = run.source.version if run.until_version is None else min(run.source.version, run.until_version)
    assert all(version <= latest for version in versions(result[1]))


@given(run_facts)
def test_moves_never_move_a_checkpoint_forward(run: RunFacts) -> None:
    decided = prepare_run(run)
    if isinstance(decided, Refused) or run.checkpoint is None:
        assert isinstance(decided, Refused) or decided.moves == ()
        return
    version = run.checkpoint.version
    for move in decided.moves:
        assert 0 <= move.version <= version
        version = move.version
    assert decided.state.checkpoint is not None and decided.state.checkpoint.version == version


@given(run_facts)
def test_a_foreign_target_is_always_refused(run: RunFacts) -> None:
    decided = prepare_run(run)
    foreign = run.target is not None and run.target.finding is Finding.FOREIGN
    # (a log or history no checkpoint describes may be refused too, test_feed_and_kept_plan, and one
    # whose provider table restarted its versions, test_restart_plan)
    view = run.checkpoint
    if run.left is None and not (run.mode in FEED_ONLY and view is not None and restarted(view, run.source)):
        assert isinstance(decided, Refused) == foreign
    if foreign:
        assert isinstance(decided, Refused) and run.name in decided.message and "will not overwrite" in decided.message


@given(run_facts, st.none() | VERSIONS)
def test_a_rebuild_always_starts_with_a_bootstrap(run: RunFacts, start: int | None) -> None:
    result = planned(run, start)
    if result is None or result[0].state.rebuild is None or isinstance(result[1], NoChangeFeed):
        return  # (a log or history without a change feed is never rebuilt from a snapshot)
    assert isinstance(result[1], Bootstrap)
    assert result[1].warning is not None and "rebuilt from the provider's snapshot" in result[1].warning


@given(run_facts, VERSIONS, st.none() | VERSIONS)
def test_a_full_refresh_always_bootstraps(run: RunFacts, refresh: int, start: int | None) -> None:
    run = dataclasses.replace(run, backfill=Backfill(refresh, full_refresh=True))
    result = planned(run, start)
    if result is None or isinstance(result[1], NoChangeFeed):
        return
    assert isinstance(result[1], Bootstrap)
    assert run.backfill is not None and result[0].state.refresh_from == run.backfill.replay_from


CAUSES = st.lists(st.sampled_from(["gap", "schema", "feed"]), min_size=1, max_size=6)


@given(run_facts, checkpoints, st.booleans(), CAUSES)
def test_each_cause_replans_at_most_once(
    run: RunFacts, stored: CheckpointView | None, applied: bool, causes: list[str]
) -> None:
    decided = prepare_run(run)
    if isinstance(decided, Refused):
        return
    state: PlanState | None = decided.state
    answered: set[str] = set()
    for cause in causes:
        assert state is not None
        again = replan(
            state,
            stored,
            applied,
            history_gap=cause == "gap",
            schema_change="c" if cause == "schema" else None,
            feed_refused="cdf is not enabled on table t" if cause == "feed" else None,
        )
        assert (again is None) == (cause in answered)
        if again is None:
            return
        answered.add(cause)
        assert isinstance(plan_run(again).plan, (Bootstrap, UpToDate, ApplyChanges, NoChangeFeed))
        state = again


@given(run_facts, st.none() | VERSIONS)
def test_after_batches_a_replan_neither_rebuilds_nor_refreshes_again(run: RunFacts, start: int | None) -> None:
    decided = prepare_run(run)
    if isinstance(decided, Refused):
        return
    again = replan(decided.state, CheckpointView(5, "t1"), True, history_gap=True)
    assert again is not None
    planned_again = plan_run(again, start)
    assert planned_again.rewrites_from is None
    assert not (isinstance(planned_again.plan, Bootstrap) and "rebuilt from" in (planned_again.plan.warning or ""))


# -- resuming from the target's own record (a lost or older state store)


@given(
    checkpoint=st.none() | st.integers(0, 50),
    recorded=st.integers(0, 50),
    high_water=st.none() | st.integers(0, 50),
    mode=st.sampled_from(list(Mode)),
)
def test_resuming_from_the_target_only_ever_moves_a_checkpoint_up_to_what_the_target_holds(
    checkpoint: int | None, recorded: int, high_water: int | None, mode: Mode
) -> None:
    version = resume_version(checkpoint, recorded, mode, high_water)
    holds = max(recorded, high_water - 1 if mode in (Mode.MERGE, Mode.HISTORY) and high_water else recorded)
    if version is None:  # the checkpoint stands: it is there and not behind
        assert checkpoint is not None and checkpoint >= holds
    else:  # missing or behind: exactly what the target holds, never more
        assert version == holds and (checkpoint is None or version > checkpoint)


def test_a_merge_target_resumes_from_its_rows_when_its_merges_carry_no_record() -> None:
    # Sail's MERGE writes no userMetadata: the bootstrap recorded 2, the rows reach 9.
    assert resume_version(None, 2, Mode.MERGE, 9) == 8  # re-applying version 9 is a no-op per key
    assert resume_version(None, 2, Mode.APPEND, 9) == 2  # an append target's record is exact
    assert resume_version(8, 2, Mode.MERGE, 9) is None
