"""Issue 40 in the pure planner: an append or history target whose provider table restarted its
versions (re-created, rewound) is kept and continued, or the pass refused; never replaced. And a
synced target is never moved out of append or history mode by the config alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharesync.sync.core.changefeed import ChangeFeed
from sharesync.sync.core.config import Mode
from sharesync.sync.planning.kept_target import switch_refused
from sharesync.sync.planning.run_plan import (
    Backfill,
    Finding,
    Prepared,
    Refused,
    RunFacts,
    TargetFact,
    plan_run,
    prepare_run,
)
from sharesync.sync.planning.sync_plan import FEED_ONLY, Bootstrap, BootstrapReason, CheckpointView, SourceView

NAME = "share.schema.t"
DISCARD = f"sharesync reset {NAME} --discard-target"
VERSIONS = st.integers(min_value=0, max_value=30)


def facts(mode: Mode, source: SourceView, checkpoint: CheckpointView | None = None, **more: object) -> RunFacts:
    view = checkpoint or CheckpointView(8, "t1")
    return RunFacts(NAME, mode, view, source, 4, **more)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", FEED_ONLY)
@pytest.mark.parametrize(
    ("source", "said"),
    [
        (SourceView(3, "t2", ChangeFeed.ON), "re-created its table (id t1 → t2)"),
        (SourceView(8, "t2", ChangeFeed.ON), "re-created"),  # the snapshot's rows would land at version 8
        (SourceView(5, "t1", ChangeFeed.ON), "rewound its table's versions"),
    ],
)
def test_a_log_the_new_versions_do_not_pass_is_refused(mode: Mode, source: SourceView, said: str) -> None:
    """The defect: the log was overwritten with the new table's snapshot (the old rows lost)."""
    decided = prepare_run(facts(mode, source))
    assert isinstance(decided, Refused)
    assert said in decided.message and DISCARD in decided.message and "nothing was written" in decided.message
    assert "\n" not in decided.message


@pytest.mark.parametrize("mode", FEED_ONLY)
def test_a_log_is_continued_once_the_new_versions_pass_it(mode: Mode) -> None:
    decided = prepare_run(facts(mode, SourceView(12, "t2", ChangeFeed.ON)))
    assert isinstance(decided, Prepared) and not decided.moves
    run = plan_run(decided.state)
    assert isinstance(run.plan, Bootstrap) and run.plan.reason is BootstrapReason.SOURCE_RECREATED
    assert run.plan.version == 12 and run.plan.then == ()
    assert run.keep_after == (8 if mode is Mode.APPEND else None)  # history keeps its rows anyway
    what = "change log" if mode is Mode.APPEND else "row history"
    assert run.plan.warning is not None and f"keeps its {what} up to source version 8" in run.plan.warning
    assert "re-created" in run.plan.warning and "--discard-target" in run.plan.warning


@pytest.mark.parametrize("mode", [Mode.MERGE, Mode.SNAPSHOT])
def test_merge_and_snapshot_targets_are_rebuilt_as_before(mode: Mode) -> None:
    decided = prepare_run(facts(mode, SourceView(3, "t2", ChangeFeed.ON)))
    assert isinstance(decided, Prepared)
    run = plan_run(decided.state)
    assert isinstance(run.plan, Bootstrap) and run.keep_after is None


@pytest.mark.parametrize("finding", [Finding.LOST, Finding.REPLACED])
def test_a_target_already_gone_is_rebuilt(finding: Finding) -> None:
    lost = TargetFact(finding, "/t", "target /t was lost")
    decided = prepare_run(facts(Mode.APPEND, SourceView(3, "t2", ChangeFeed.ON), target=lost))
    assert isinstance(decided, Prepared) and decided.state.restart_keep is None


def test_a_backfill_waits_for_the_log_to_be_continued_unless_it_discards() -> None:
    source = SourceView(12, "t2", ChangeFeed.ON)
    refused = prepare_run(facts(Mode.APPEND, source, backfill=Backfill(10)))
    assert isinstance(refused, Refused) and f"run 'sharesync sync {NAME}' first" in refused.message
    discarding = Backfill(10, full_refresh=True, discard=True)
    assert isinstance(prepare_run(facts(Mode.APPEND, source, backfill=discarding)), Prepared)


@given(
    mode=st.sampled_from(FEED_ONLY),
    checkpoint=VERSIONS,
    source=VERSIONS,
    same_table=st.booleans(),
)
def test_no_plan_replaces_an_append_or_history_target(
    mode: Mode, checkpoint: int, source: int, same_table: bool
) -> None:
    """Whatever the provider's table did, a target its checkpoint describes keeps its rows: the
    pass is refused, changes are applied, or a bootstrap past its rows continues them."""
    view = CheckpointView(checkpoint, "t1")
    decided = prepare_run(facts(mode, SourceView(source, "t1" if same_table else "t2", ChangeFeed.ON), view))
    if isinstance(decided, Refused):
        assert DISCARD in decided.message
        return
    run = plan_run(decided.state)
    if isinstance(run.plan, Bootstrap):
        assert run.plan.version > checkpoint  # one version sequence: every kept row is older
        assert run.keep_after == (checkpoint if mode is Mode.APPEND else None)


@given(was=st.sampled_from(list(Mode)), now=st.sampled_from(list(Mode)))
def test_the_config_never_moves_a_target_out_of_a_log_or_history(was: Mode, now: Mode) -> None:
    refused = switch_refused(was, now)
    if was is now:
        assert not refused
    elif was in FEED_ONLY or now is Mode.HISTORY:
        assert refused
    else:  # merge and snapshot targets the provider rebuilds; a new log starts on them
        assert not refused
