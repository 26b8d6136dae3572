"""Planning rules, example-based and property-based (planning is pure, so no fixtures)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharesync.sync.core.changefeed import ChangeFeed
from sharesync.sync.core.config import Mode
from sharesync.sync.planning.sync_plan import (
    ApplyChanges,
    Bootstrap,
    BootstrapReason,
    CheckpointView,
    PlanOptions,
    SourceView,
    UpToDate,
    VersionRange,
    plan_sync,
    split_batches,
)

SOURCE = SourceView(version=10, table_id="t1", change_feed=ChangeFeed.ON)
MERGE = PlanOptions(mode=Mode.MERGE, max_versions_per_batch=4)


def test_first_sync_bootstraps_from_latest() -> None:
    assert plan_sync(None, SOURCE, MERGE) == Bootstrap(10, BootstrapReason.FIRST_SYNC)


def test_first_sync_from_an_older_version_then_applies_the_rest_in_batches() -> None:
    plan = plan_sync(None, SOURCE, PlanOptions(mode=Mode.MERGE, max_versions_per_batch=4, start_version=3))
    assert plan == Bootstrap(3, BootstrapReason.FIRST_SYNC, then=(VersionRange(4, 7), VersionRange(8, 10)))


def test_up_to_date_when_checkpoint_is_latest() -> None:
    assert plan_sync(CheckpointView(10, "t1"), SOURCE, MERGE) == UpToDate(10)


def test_changes_are_batched_from_checkpoint_plus_one() -> None:
    plan = plan_sync(CheckpointView(2, "t1"), SOURCE, MERGE)
    assert plan == ApplyChanges((VersionRange(3, 6), VersionRange(7, 10)))


@pytest.mark.parametrize(
    ("checkpoint", "source", "options", "reason"),
    [
        (CheckpointView(2, "old"), SOURCE, MERGE, BootstrapReason.SOURCE_RECREATED),
        (CheckpointView(2, "t1"), SourceView(10, "t1", change_feed=ChangeFeed.OFF), MERGE, BootstrapReason.NO_CDF),
        (
            CheckpointView(2, "t1"),
            SOURCE,
            PlanOptions(mode=Mode.APPEND, history_gap=True),
            BootstrapReason.HISTORY_GAP,
        ),
        (CheckpointView(12, "t1"), SOURCE, MERGE, BootstrapReason.SOURCE_REWOUND),
        (CheckpointView(2, "t1"), SOURCE, PlanOptions(mode=Mode.SNAPSHOT), BootstrapReason.SNAPSHOT_MODE),
        (CheckpointView(2, "t1", target_matches=False), SOURCE, MERGE, BootstrapReason.TARGET_CHANGED),
        (CheckpointView(10, "t1", target_matches=False), SOURCE, MERGE, BootstrapReason.TARGET_CHANGED),
        (
            CheckpointView(2, "t1"),
            SOURCE,
            PlanOptions(mode=Mode.HISTORY, schema_change="column 'qty' is missing from the new data"),
            BootstrapReason.SCHEMA_CHANGED,
        ),
    ],
)
def test_rebootstrap_cases(
    checkpoint: CheckpointView, source: SourceView, options: PlanOptions, reason: BootstrapReason
) -> None:
    plan = plan_sync(checkpoint, source, options)
    assert isinstance(plan, Bootstrap)
    assert plan.reason is reason
    assert plan.version == source.version
    if reason is not BootstrapReason.SNAPSHOT_MODE:
        assert plan.warning  # every unexpected re-bootstrap explains itself in the run record


def test_snapshot_mode_up_to_date_without_new_version() -> None:
    assert plan_sync(CheckpointView(10, "t1"), SOURCE, PlanOptions(mode=Mode.SNAPSHOT)) == UpToDate(10)


def test_backfill_replays_from_an_earlier_version_even_when_up_to_date() -> None:
    plan = plan_sync(CheckpointView(10, "t1"), SOURCE, PlanOptions(mode=Mode.MERGE, replay_from=5))
    assert plan == ApplyChanges((VersionRange(5, 10),), replay_from=5)


def test_backfill_never_skips_versions_after_a_lagging_checkpoint() -> None:
    plan = plan_sync(CheckpointView(2, "t1"), SOURCE, PlanOptions(mode=Mode.MERGE, replay_from=7))
    assert isinstance(plan, ApplyChanges)
    assert plan.start == 3


def test_backfill_until_version_stops_early() -> None:
    plan = plan_sync(CheckpointView(10, "t1"), SOURCE, PlanOptions(mode=Mode.MERGE, replay_from=4, until_version=6))
    assert plan == ApplyChanges((VersionRange(4, 6),), replay_from=4)


def test_invalid_ranges_are_rejected() -> None:
    with pytest.raises(ValueError):
        VersionRange(5, 4)
    with pytest.raises(ValueError):
        split_batches(0, 3, 0)


@given(
    start=st.integers(0, 500),
    length=st.integers(0, 500),
    size=st.integers(1, 120),
)
def test_batches_cover_the_range_exactly_and_contiguously(start: int, length: int, size: int) -> None:
    end = start + length - 1
    batches = split_batches(start, end, size)
    covered = [v for b in batches for v in range(b.start, b.end + 1)]
    assert covered == list(range(start, end + 1))
    assert all(b.size <= size for b in batches)


@given(
    checkpoint=st.integers(0, 300),
    ahead=st.integers(0, 300),
    size=st.integers(1, 50),
    mode=st.sampled_from([Mode.MERGE, Mode.APPEND]),
)
def test_applying_batches_one_by_one_equals_one_plan(checkpoint: int, ahead: int, size: int, mode: Mode) -> None:
    """Re-planning after each batch (what a crash-and-resume does) yields the same batches."""
    source = SourceView(checkpoint + ahead, "t1", change_feed=ChangeFeed.ON)
    options = PlanOptions(mode=mode, max_versions_per_batch=size)
    whole = plan_sync(CheckpointView(checkpoint, "t1"), source, options)
    stepped: list[VersionRange] = []
    current = checkpoint
    while True:
        plan = plan_sync(CheckpointView(current, "t1"), source, options)
        if isinstance(plan, UpToDate):
            break
        assert isinstance(plan, ApplyChanges)
        stepped.append(plan.batches[0])
        current = plan.batches[0].end
    if ahead == 0:
        assert whole == UpToDate(checkpoint)
    else:
        assert isinstance(whole, ApplyChanges)
        assert list(whole.batches) == stepped
    assert current == source.version


@pytest.mark.parametrize("start", [None, 3])
def test_first_sync_whose_start_is_gone_bootstraps_from_latest_with_a_warning(start: int | None) -> None:
    options = PlanOptions(mode=Mode.APPEND, start_version=start, history_gap=True)
    plan = plan_sync(None, SOURCE, options)
    assert isinstance(plan, Bootstrap) and (plan.version, plan.reason, plan.then) == (10, BootstrapReason.HISTORY_GAP, ())
    assert plan.warning is not None and "no longer served" in plan.warning


@given(
    checkpoint=st.integers(0, 300),
    ahead=st.integers(1, 300),
    mode=st.sampled_from(list(Mode)),
    gap=st.booleans(),
)
def test_a_breaking_schema_change_to_rebuild_always_rebootstraps_at_the_latest_version_naming_it(
    checkpoint: int, ahead: int, mode: Mode, gap: bool
) -> None:
    """Whatever else holds (a history gap, snapshot mode), the rebuild is one snapshot at the
    latest version — never batches of changes the target cannot take — and says what changed."""
    source = SourceView(checkpoint + ahead, "t1", change_feed=ChangeFeed.ON)
    options = PlanOptions(mode=mode, history_gap=gap, schema_change="column 'small' changed type short -> string")
    plan = plan_sync(CheckpointView(checkpoint, "t1"), source, options)
    assert isinstance(plan, Bootstrap)
    assert (plan.version, plan.reason, plan.then) == (source.version, BootstrapReason.SCHEMA_CHANGED, ())
    assert plan.warning is not None and "'small' changed type" in plan.warning and "rebuild" in plan.warning
