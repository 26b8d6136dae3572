"""Issue 40 §1.2 and §1.3 in the pure planner: a change data feed the metadata leaves unknown is
asked for; an append or history target never gets a snapshot as changes; a change log or row
history no checkpoint describes is kept (or the pass refused), never replaced."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharesync.sync.core.changefeed import ChangeFeed, change_feed_of
from sharesync.sync.core.config import Mode
from sharesync.sync.planning.kept_target import LeftTarget
from sharesync.sync.planning.run_plan import Backfill, Prepared, Refused, RunFacts, plan_run, prepare_run, replan
from sharesync.sync.planning.sync_plan import (
    FEED_ONLY,
    ApplyChanges,
    Bootstrap,
    BootstrapReason,
    CheckpointView,
    NoChangeFeed,
    PlanOptions,
    SourceView,
    VersionRange,
    plan_sync,
)

VERSIONS = st.integers(min_value=0, max_value=30)
REFUSAL = "cdf is not enabled on table share.schema.t"


def facts(mode: Mode, feed: ChangeFeed = ChangeFeed.ON, **changes: object) -> RunFacts:
    base: dict[str, object] = {
        "name": "share.schema.t",
        "mode": mode,
        "checkpoint": CheckpointView(8, "t1"),
        "source": SourceView(10, "t1", feed),
        "max_versions_per_batch": 4,
    }
    return RunFacts(**{**base, **changes})  # type: ignore[arg-type]


def prepared(run: RunFacts) -> Prepared:
    decided = prepare_run(run)
    assert isinstance(decided, Prepared), decided
    return decided


@pytest.mark.parametrize(
    ("configuration", "feed"),
    [
        (None, ChangeFeed.UNKNOWN),  # left out: says nothing
        ({}, ChangeFeed.OFF),  # the reference server's answer for a table without a feed
        ({"enableChangeDataFeed": "true"}, ChangeFeed.ON),
        ({"delta.enableChangeDataFeed": "TRUE"}, ChangeFeed.ON),
        ({"delta.enableChangeDataFeed": "false"}, ChangeFeed.OFF),
    ],
)
def test_a_missing_configuration_is_unknown_not_off(configuration: dict[str, str] | None, feed: ChangeFeed) -> None:
    assert change_feed_of(configuration) is feed


@pytest.mark.parametrize("mode", list(Mode))
def test_an_unknown_feed_is_asked_for(mode: Mode) -> None:
    """The defect: an unknown feed read as off re-bootstrapped every new version (in append mode,
    the whole snapshot again as inserts)."""
    unknown = plan_run(prepared(facts(mode, ChangeFeed.UNKNOWN)).state).plan
    assert unknown == plan_run(prepared(facts(mode, ChangeFeed.ON)).state).plan
    if mode is not Mode.SNAPSHOT:
        assert unknown == ApplyChanges((VersionRange(9, 10),))


@pytest.mark.parametrize("mode", FEED_ONLY)
@pytest.mark.parametrize("checkpoint", [None, CheckpointView(8, "t1")])
def test_an_append_or_history_table_without_a_feed_writes_nothing(
    mode: Mode, checkpoint: CheckpointView | None
) -> None:
    plan = plan_run(prepared(facts(mode, ChangeFeed.OFF, checkpoint=checkpoint)).state).plan
    assert isinstance(plan, NoChangeFeed)
    assert "does not publish a change data feed" in plan.message and "nothing was written" in plan.message
    assert "'mode: merge'" in plan.message


@pytest.mark.parametrize("mode", FEED_ONLY)
def test_a_refused_feed_fails_an_append_or_history_table_naming_the_refusal(mode: Mode) -> None:
    state = prepared(facts(mode, ChangeFeed.UNKNOWN)).state
    again = replan(state, CheckpointView(8, "t1"), False, feed_refused=REFUSAL)
    assert again is not None
    plan = plan_run(again).plan
    assert isinstance(plan, NoChangeFeed) and REFUSAL in plan.message
    assert replan(again, CheckpointView(8, "t1"), False, feed_refused=REFUSAL) is None  # once per cause


def test_a_refused_feed_rebootstraps_a_merge_table_saying_so() -> None:
    state = prepared(facts(Mode.MERGE, ChangeFeed.UNKNOWN)).state
    again = replan(state, CheckpointView(8, "t1"), False, feed_refused=REFUSAL)
    assert again is not None
    plan = plan_run(again).plan
    assert isinstance(plan, Bootstrap) and plan.reason is BootstrapReason.NO_CDF and plan.version == 10
    assert plan.warning is not None and REFUSAL in plan.warning


@given(
    st.sampled_from(FEED_ONLY),
    st.none() | st.builds(CheckpointView, VERSIONS, st.sampled_from(["t1", "t0"]), target_matches=st.booleans()),
    st.builds(
        PlanOptions, st.sampled_from(FEED_ONLY), history_gap=st.booleans(), schema_change=st.none() | st.just("c")
    ),
    VERSIONS,
)
def test_without_a_feed_a_log_or_history_never_gets_a_snapshot(
    mode: Mode, checkpoint: CheckpointView | None, options: PlanOptions, version: int
) -> None:
    """Whatever else happened (re-created source, gap, schema change, another target)."""
    plan = plan_sync(checkpoint, SourceView(version, "t1", ChangeFeed.OFF), dataclasses.replace(options, mode=mode))
    assert isinstance(plan, NoChangeFeed)


# ------------------------------------------------------------ a target without a checkpoint


def left(layout: Mode = Mode.APPEND, high_water: int = 7) -> LeftTarget:
    return LeftTarget(layout, "/t", high_water)


@pytest.mark.parametrize("mode", FEED_ONLY)
def test_after_reset_a_log_or_history_is_kept_and_continued(mode: Mode) -> None:
    decided = prepared(facts(mode, checkpoint=None, left=left(mode)))
    planned = plan_run(decided.state, start_version=2)  # the configured start is for a first sync only
    plan = planned.plan
    assert isinstance(plan, Bootstrap) and plan.reason is BootstrapReason.KEPT and plan.version == 10
    assert plan.warning is not None and "keeps its" in plan.warning and "up to source version 7" in plan.warning
    assert planned.keep_after == (7 if mode is Mode.APPEND else None)


@pytest.mark.parametrize(
    ("mode", "layout", "checkpoint", "high_water", "said"),
    [
        (Mode.MERGE, Mode.APPEND, None, 7, "set to 'merge' mode now"),
        (Mode.APPEND, Mode.HISTORY, None, 7, "set to 'append' mode now"),
        (Mode.HISTORY, Mode.APPEND, CheckpointView(8, "t1", target_matches=False), 7, "set to 'history' mode now"),
        (Mode.APPEND, Mode.APPEND, CheckpointView(8, "t1", target_matches=False), 7, "continues it"),
        (Mode.APPEND, Mode.APPEND, None, 11, "re-created or rewound"),
    ],
)
def test_a_log_or_history_that_cannot_be_continued_is_refused(
    mode: Mode, layout: Mode, checkpoint: CheckpointView | None, high_water: int, said: str
) -> None:
    decided = prepare_run(facts(mode, checkpoint=checkpoint, left=left(layout, high_water)))
    assert isinstance(decided, Refused)
    assert said in decided.message and "sharesync reset share.schema.t --discard-target" in decided.message


def test_a_backfill_without_a_checkpoint_over_a_kept_log_is_refused() -> None:
    decided = prepare_run(facts(Mode.APPEND, checkpoint=None, left=left(), backfill=Backfill(3, full_refresh=True)))
    assert isinstance(decided, Refused) and "run 'sharesync sync share.schema.t' first" in decided.message


@pytest.mark.parametrize(("discard", "keep_after"), [(False, 3), (True, None)])
def test_a_full_refresh_keeps_an_append_log_before_its_version_unless_discarded(
    discard: bool, keep_after: int | None
) -> None:
    decided = prepared(facts(Mode.APPEND, backfill=Backfill(4, full_refresh=True, discard=discard)))
    planned = plan_run(decided.state)
    assert isinstance(planned.plan, Bootstrap) and planned.plan.version == 4
    assert planned.keep_after == keep_after


@given(
    st.sampled_from(Mode),
    st.none() | st.builds(CheckpointView, VERSIONS, st.just("t1"), target_matches=st.just(False)),
    st.sampled_from(ChangeFeed),
    st.builds(LeftTarget, st.sampled_from(FEED_ONLY), st.just("/t"), VERSIONS),
    VERSIONS,
)
def test_a_log_or_history_no_checkpoint_describes_is_never_replaced(
    mode: Mode, checkpoint: CheckpointView | None, feed: ChangeFeed, found: LeftTarget, version: int
) -> None:
    run = facts(mode, feed, checkpoint=checkpoint, left=found, source=SourceView(version, "t1", feed))
    decided = prepare_run(run)
    if isinstance(decided, Refused):
        return
    planned = plan_run(decided.state)
    if isinstance(planned.plan, NoChangeFeed):
        return
    # Kept: only the same mode, without a checkpoint, and continued after its rows.
    assert checkpoint is None and mode is found.layout and found.high_water <= version
    assert isinstance(planned.plan, Bootstrap) and planned.plan.reason is BootstrapReason.KEPT
    assert planned.keep_after == (found.high_water if mode is Mode.APPEND else None)
