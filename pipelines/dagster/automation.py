"""Declarative automation (``automation: declarative``): conditions instead of the source sensor.

Each shared table's observable source is observed on ``observe_schedule`` (cron, default every
minute): the observe op asks the provider for each table's metadata. Each table asset carries a
condition that requests it once when its source's data version — the provider's table
version — changed since it was last requested (or, once the source has a version, when the
table was never synced), or when the code location reloads a config that changed the table's
data-shaping fields (its code version: a new target or mode is rebuilt; a reload that lands
while a run of the table is in progress waits for the next source version), and not while a run
of it is in progress. When a table's freshness
policy turns to WARN, a no-op sync confirms the copy (see
:mod:`~sharesync.pipelines.dagster.freshness`). The routine checks run after each sync.

The ``sharesync_automation`` sensor evaluates these conditions (every
``sensor_interval_seconds``); it runs by default, like the source sensor it replaces.
Cost either way: one provider call per table per tick.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

AUTOMATION_SENSOR = "sharesync_automation"


def table_condition() -> dg.AutomationCondition[dg.AssetKey]:
    """Once per new source data version (and when the freshness policy warns), never while running."""
    condition = dg.AutomationCondition
    changed = condition.any_deps_match(condition.data_version_changed()).with_label("source version changed")
    # Once the source has a version: before, its first observation would sync the table a second time.
    never_synced = (condition.missing() & ~condition.any_deps_missing()).newly_true().with_label("never synced")
    # Never true for a table without a freshness policy.
    warned = condition.freshness_warned().newly_true().with_label("freshness warned")
    pending = (changed | never_synced | warned).since(condition.newly_requested())
    # The code version hashes the table's data-shaping config: a new target or mode is rebuilt
    # while the provider is quiet (the source sensor does the same with a rebuild run). True on
    # the one tick that sees the new version — outside ``since``, or a request on the tick
    # before (whose ``newly_requested`` resets it) would swallow it.
    moved = (condition.code_version_changed() & ~condition.missing()).with_label("config changed")
    return ((pending | moved) & ~condition.in_progress()).with_label("sharesync: new source version")


def source_condition(cron: str) -> dg.AutomationCondition[dg.AssetKey]:
    """Observe the source on each tick of ``cron`` (UTC), not while an observation is running."""
    tick = dg.AutomationCondition.cron_tick_passed(cron, cron_timezone="UTC")
    return (tick & ~dg.AutomationCondition.in_progress()).with_label(f"observe on '{cron}'")


def build_automation_sensor(
    keys: Sequence[dg.AssetKey],
    *,
    interval_seconds: int,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.assets(*keys),
        default_status=default_status,
        minimum_interval_seconds=interval_seconds,
        description="Observes the shared tables on observe_schedule and syncs each one whose version changed.",
    )
