"""Freshness: Dagster's native policy from ``freshness_minutes``, and the confirming runs that keep it honest."""

from __future__ import annotations

import time
from datetime import timedelta

import dagster as dg
import pytest
from support.dagster_site import MERGE_TABLE, Site, full_name, materialize

from sharesync.pipelines.dagster.assets import build_sync_asset_specs
from sharesync.pipelines.dagster.freshness import confirmation_due, freshness_policy
from sharesync.pipelines.dagster.sensors import SENSOR_NAME, SensorCursor, plan_tick
from sharesync.state import Checkpoint
from sharesync.sync.core.errors import SharesyncError


@pytest.mark.parametrize(
    ("minutes", "fail", "warn"),
    [
        (60, timedelta(hours=1), timedelta(minutes=30)),
        (1.5, timedelta(seconds=90), None),  # half would be under Dagster's one-minute floor
        (0.5, timedelta(minutes=1), None),  # raised to the floor
    ],
)
def test_policy_fails_at_the_bound_and_warns_at_half(minutes: float, fail: timedelta, warn: timedelta | None) -> None:
    policy = freshness_policy(minutes)
    assert isinstance(policy, dg.FreshnessPolicy)
    assert policy.fail_window.to_timedelta() == fail  # type: ignore[attr-defined]
    assert (policy.warn_window.to_timedelta() if policy.warn_window else None) == warn  # type: ignore[attr-defined]
    assert freshness_policy(None) is None


def test_assets_carry_the_policy_of_their_bound(site: Site) -> None:
    site.write_config(site.merge_spec(freshness_minutes=20), site.append_spec(), defaults={"freshness_minutes": 120})
    orders, events = build_sync_asset_specs(site.config())
    assert orders.freshness_policy == freshness_policy(20)
    assert events.freshness_policy == freshness_policy(120)
    site.write_config(site.merge_spec())
    assert build_sync_asset_specs(site.config())[0].freshness_policy is None


@pytest.mark.parametrize(
    ("materialized", "confirmed", "due"),
    [
        (None, None, False),  # never synced: the first sync is requested anyway
        (1000 - 1199, None, False),  # a bound of 60 min: a third is 1200 s
        (1000 - 1200, None, True),
        (1000 - 1200, 1000 - 600, False),  # asked 10 minutes ago; the run is still coming
        (1000 - 3000, 1000 - 1300, True),
    ],
)
def test_confirmation_is_due_after_a_third_of_the_bound(
    materialized: float | None, confirmed: float | None, due: bool
) -> None:
    assert confirmation_due(60, materialized, confirmed, 1000) is due


def test_the_sensor_confirms_a_quiet_bounded_table_once(site: Site) -> None:
    site.write_config(site.merge_spec(freshness_minutes=60), site.append_spec())
    config = site.config()
    orders, events = full_name(MERGE_TABLE), config.tables[1].name
    at_source = {  # written for the configured targets: a checkpoint for another one asks for a rebuild
        orders: Checkpoint(orders, 4, "id", "fp", config.table(orders).target, "merge"),
        events: Checkpoint(events, 2, "id", "fp", config.table(events).target, "append"),
    }
    versions: dict[str, int | SharesyncError] = {orders: 4, events: 2}
    stale = {orders: 0.0, events: 0.0}  # both last materialized long ago; only orders has a bound

    first = plan_tick(config, config.tables, versions, at_source, SensorCursor(), now=5000.0, materialized_at=stale)
    assert [r.run_key for r in first.run_requests] == [f"{orders}@4/confirm@5000"]
    assert first.cursor.confirmed == {orders: 5000.0}

    again = plan_tick(config, config.tables, versions, at_source, first.cursor, now=5060.0, materialized_at=stale)
    assert again.run_requests == []
    assert SensorCursor.parse(first.cursor.dumps()) == first.cursor


@pytest.mark.slow
def test_the_sensor_reads_the_last_materialization_from_the_instance(site: Site, instance: dg.DagsterInstance) -> None:
    site.write_config(site.merge_spec(freshness_minutes=0.05))  # a third of it: 1 s
    defs = site.definitions()
    materialize(defs, dg.AssetSelection.assets(site.key(MERGE_TABLE)).without_checks(), instance=instance)
    sensor = defs.resolve_sensor_def(SENSOR_NAME)
    tick = sensor(dg.build_sensor_context(instance=instance, resources=dict(defs.resources or {})))
    assert isinstance(tick, dg.SensorResult)
    assert tick.run_requests == []  # just synced: nothing to confirm

    time.sleep(1.1)
    later = sensor(dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources=dict(defs.resources or {})))
    assert isinstance(later, dg.SensorResult)
    assert [r.run_key.split("/")[1][:8] for r in later.run_requests or []] == ["confirm@"]  # type: ignore[union-attr]
