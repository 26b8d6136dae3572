"""``automation: declarative``: conditions on the assets instead of the source sensor.

The end-to-end test plays the automation sensor's part with Dagster's own evaluator
(``evaluate_automation_conditions``) against a persistent instance, and runs what each tick
requests through the real definitions, the real local sharing server and the embedded engine.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
from deltalake import DeltaTable
from support.dagster_site import MERGE_TABLE, Site, materialization, materialize

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.automation import AUTOMATION_SENSOR
from sharesync.pipelines.dagster.sensors import SENSOR_NAME
from sharesync.pipelines.targets.delta.rows import read_rows


class Ticks:
    """Evaluates the definitions' automation conditions tick by tick and runs what they request."""

    def __init__(self, defs: dg.Definitions, instance: dg.DagsterInstance) -> None:
        self.defs = defs
        self.instance = instance
        self.cursor: object = None
        self.runs: list[dg.ExecuteInProcessResult] = []
        self.checks: set[dg.AssetCheckKey] = set()  # requested by the last tick

    def tick(self, at: datetime | None = None) -> set[dg.AssetKey]:
        result = dg.evaluate_automation_conditions(
            defs=self.defs,
            instance=self.instance,
            asset_selection=dg.AssetSelection.assets(*self._keys()),  # the default selection warns (beta)
            cursor=self.cursor,  # type: ignore[arg-type]
            evaluation_time=at,
        )
        self.cursor = result.cursor
        requested = {key for key in self._keys() if result.get_num_requested(key)}
        self.checks = {r.key for r in result.results if isinstance(r.key, dg.AssetCheckKey) and r.true_subset.size}
        if requested or self.checks:
            selection = dg.AssetSelection.assets(*requested).without_checks() | dg.AssetSelection.checks(*self.checks)
            self.runs.append(materialize(self.defs, selection, instance=self.instance))
        return requested

    def _keys(self) -> list[dg.AssetKey]:
        return list(self.defs.get_repository_def().asset_graph.get_all_asset_keys())


def test_declarative_mode_replaces_the_sensor_with_conditions(site: Site) -> None:
    site.write_config(site.merge_spec(), automation="declarative", observe_schedule="*/5 * * * *")
    defs = site.definitions()
    graph = defs.get_repository_def().asset_graph
    table, source = site.key(MERGE_TABLE), naming.source_key(site.table_config(MERGE_TABLE))

    assert [s.name for s in defs.sensors or []] == [AUTOMATION_SENSOR]
    assert isinstance(defs.resolve_sensor_def(AUTOMATION_SENSOR), dg.AutomationConditionSensorDefinition)
    assert "source version changed" in str(graph.get(table).automation_condition)
    assert "*/5 * * * *" in str(graph.get(source).automation_condition)

    site.write_config(site.merge_spec())  # the default: the sensor, no conditions
    classic = site.definitions()
    assert [s.name for s in classic.sensors or []] == [SENSOR_NAME]
    assert classic.get_repository_def().asset_graph.get(table).automation_condition is None


@pytest.mark.slow
def test_one_provider_commit_leads_to_exactly_one_materialization(site: Site, instance: dg.DagsterInstance) -> None:
    site.write_config(site.merge_spec(), automation="declarative")
    defs = site.definitions()
    table, source = site.key(MERGE_TABLE), naming.source_key(site.table_config(MERGE_TABLE))
    ticks = Ticks(defs, instance)
    # Tick times are chosen within whole minutes: the source is observed on "* * * * *".
    start = datetime.now(UTC).replace(second=1, microsecond=0) + timedelta(minutes=1)

    assert ticks.tick(start) == set()  # nothing observed yet
    assert ticks.tick(start + timedelta(minutes=1, seconds=5)) == {source}  # the cron tick: observe
    assert ticks.tick(start + timedelta(minutes=1, seconds=10)) == {table}  # a first version: the first sync
    assert {k.name for k in ticks.checks} == {
        "row_count_matches_source",
        "keys_unique",
        "schema_matches_source",
        "profile_token_expiry",
        "target_healthy",
    }
    assert all(e.passed for e in ticks.runs[-1].get_asset_check_evaluations())  # in the sync's run, after it
    assert ticks.tick(start + timedelta(minutes=1, seconds=20)) == set() and not ticks.checks  # checked once

    version = site.source_version(MERGE_TABLE)
    site.commit(MERGE_TABLE, 1, seed=41)
    assert ticks.tick(start + timedelta(minutes=1, seconds=30)) == set()  # not observed yet
    assert ticks.tick(start + timedelta(minutes=2, seconds=5)) == {source}  # observes version + 1
    assert ticks.tick(start + timedelta(minutes=2, seconds=10)) == {table}  # the one sync of that commit
    synced = materialization(ticks.runs[-1], table)
    assert synced["source_version_to"] == version + 1 and synced["_data_version"] == str(version + 1)

    for second in (20, 30):
        assert ticks.tick(start + timedelta(minutes=2, seconds=second)) == set()
    assert ticks.tick(start + timedelta(minutes=3, seconds=5)) == {source}  # observed again: same version
    assert ticks.tick(start + timedelta(minutes=3, seconds=10)) == set()

    materializations = instance.fetch_materializations(table, limit=10).records
    assert len(materializations) == 2  # the first sync and the one for the commit


@pytest.mark.slow
def test_a_config_that_moves_a_table_to_another_target_requests_one_sync(
    site: Site, instance: dg.DagsterInstance
) -> None:
    site.write_config(site.merge_spec(), automation="declarative")
    ticks = Ticks(site.definitions(), instance)
    table = site.key(MERGE_TABLE)
    start = datetime.now(UTC).replace(second=1, microsecond=0) + timedelta(minutes=1)
    ticks.tick(start)
    ticks.tick(start + timedelta(minutes=1, seconds=5))  # observes the source
    assert ticks.tick(start + timedelta(minutes=1, seconds=10)) == {table}  # the first sync

    # The provider is quiet; the config (and so the asset's code version) moves the table.
    site.write_config(site.merge_spec(target="warehouse/orders_v2"), automation="declarative")
    ticks.defs = site.definitions()  # the code location reloaded, on the tick after the first sync's
    assert ticks.tick(start + timedelta(minutes=1, seconds=20)) == {table}
    moved = materialization(ticks.runs[-1], table)
    assert ticks.tick(start + timedelta(minutes=1, seconds=30)) == set()  # once

    assert moved["source_version_to"] == site.source_version(MERGE_TABLE)
    assert read_rows(DeltaTable(site.target("orders_v2"))).num_rows > 0  # the new target, filled


@pytest.mark.parametrize(
    ("table", "defaults", "field"),
    [({"freshness_minutes": 1}, {}, "tables[0]"), ({}, {"freshness_minutes": 1.5}, "defaults")],
)
def test_declarative_automation_refuses_a_freshness_bound_it_cannot_keep_green(
    table: dict[str, float], defaults: dict[str, float], field: str
) -> None:
    """It confirms a quiet table when the policy warns, and Dagster has no warning under a minute."""
    from sharesync.sync.core.config import parse_config
    from sharesync.sync.core.errors import ConfigError

    raw = {
        "profile": "p.share",
        "defaults": defaults,
        "tables": [{"name": "s.sc.t", "target": "t", "keys": ["id"], **table}],
    }
    assert parse_config({**raw, "automation": "sensor"}).automation == "sensor"  # the sensor confirms at a third
    with pytest.raises(ConfigError) as refused:
        parse_config({**raw, "automation": "declarative"})
    assert f"{field}.freshness_minutes: " in str(refused.value) and "'automation: sensor'" in str(refused.value)
    floor = {"automation": "declarative", "defaults": {}, "tables": [{**raw["tables"][0], "freshness_minutes": 2}]}
    assert parse_config({**raw, **floor}).tables[0].freshness_minutes == 2
