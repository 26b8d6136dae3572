"""The source-version sensor, the observe op and the schedules."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable
from support.dagster_site import APPEND_TABLE, MERGE_TABLE, Site, full_name, materialize

from sharesync.pipelines.dagster.sensors import SENSOR_NAME, SensorCursor, plan_tick
from sharesync.pipelines.dagster.sources import DATA_VERSION_TAG
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import Checkpoint, open_store
from sharesync.sync.core.errors import ServerError


def _tick(defs: dg.Definitions, cursor: str | None) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def(SENSOR_NAME)
    context = dg.build_sensor_context(cursor=cursor, resources=dict(defs.resources or {}))
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def _observed(result: dg.SensorResult) -> dict[str, str]:
    return {e.asset_key.path[-1]: e.tags[DATA_VERSION_TAG] for e in result.asset_events}  # type: ignore[union-attr]


@pytest.mark.slow
def test_sensor_requests_only_tables_whose_version_advanced(site: Site) -> None:
    defs = site.definitions()
    orders, events = full_name(MERGE_TABLE), full_name(APPEND_TABLE)
    v_orders, v_events = site.source_version(MERGE_TABLE), site.source_version(APPEND_TABLE)

    first = _tick(defs, None)  # nothing synced yet: both tables are behind

    requested = {r.run_key: r for r in first.run_requests or []}
    assert set(requested) == {f"{orders}@{v_orders}", f"{events}@{v_events}"}
    request = requested[f"{orders}@{v_orders}"]
    assert request.asset_selection == [site.key(MERGE_TABLE)]
    assert request.tags["sharesync/table"] == orders
    assert {k.name for k in request.asset_check_keys or []} == {
        "row_count_matches_source",
        "profile_token_expiry",
        "keys_unique",
        "schema_matches_source",
        "target_healthy",
    }
    assert _observed(first) == {MERGE_TABLE: str(v_orders), APPEND_TABLE: str(v_events)}

    second = _tick(defs, first.cursor)  # no change, runs not done yet: nothing twice
    assert not second.run_requests and not second.asset_events and second.skip_reason

    materialize(defs, dg.AssetSelection.assets(site.key(MERGE_TABLE), site.key(APPEND_TABLE)).without_checks())
    site.commit(MERGE_TABLE, 2, seed=31)
    third = _tick(defs, second.cursor)

    assert [r.run_key for r in third.run_requests or []] == [f"{orders}@{v_orders + 2}"]
    assert _observed(third) == {MERGE_TABLE: str(v_orders + 2)}

    fresh = _tick(defs, None)  # a new sensor (empty cursor) after syncing: observes, requests nothing stale
    assert [r.run_key for r in fresh.run_requests or []] == [f"{orders}@{v_orders + 2}"]
    assert set(_observed(fresh)) == {MERGE_TABLE, APPEND_TABLE}


def test_plan_tick_skips_a_table_whose_version_cannot_be_read(site: Site) -> None:
    site.write_config()
    config = site.config()
    versions = {full_name(MERGE_TABLE): ServerError(503, None, "down"), full_name(APPEND_TABLE): 4}

    tick = plan_tick(config, config.tables, versions, {}, SensorCursor())

    assert [r.run_key for r in tick.run_requests] == [f"{full_name(APPEND_TABLE)}@4"]
    assert len(tick.errors) == 1 and "503" in tick.errors[0]
    assert tick.cursor.observed == {full_name(APPEND_TABLE): 4}


def test_plan_tick_requests_one_rebuild_when_the_config_moves_a_table_at_its_checkpoint(site: Site) -> None:
    site.write_config()
    first = site.config()
    orders, events = full_name(MERGE_TABLE), full_name(APPEND_TABLE)
    checkpoints = {t.name: Checkpoint(t.name, 7, "source-id", "fp", t.target, t.mode.value) for t in first.tables}
    versions = {orders: 7, events: 7}

    def tick(cursor: SensorCursor, *specs: dict[str, Any]) -> tuple[list[str], SensorCursor]:
        """One tick of definitions loaded from a config with ``specs`` (default: as first written)."""
        site.write_config(*(specs or (site.merge_spec(), site.append_spec())))
        config = site.config()
        done = plan_tick(config, config.tables, versions, checkpoints, cursor)
        return [r.run_key or "" for r in done.run_requests], done.cursor

    assert tick(SensorCursor()) == ([], SensorCursor({orders: 7, events: 7}))  # unchanged: nothing

    moved = (site.merge_spec(target="warehouse/orders_v2"), site.append_spec())
    keys, cursor = tick(SensorCursor(), *moved)
    assert len(keys) == 1 and keys[0].startswith(f"{orders}@7/") and keys[0] != f"{orders}@7"
    assert tick(cursor, *moved)[0] == []  # once per version, target and mode
    assert tick(SensorCursor.parse(cursor.dumps()), *moved)[0] == []  # the stored cursor keeps it

    remoded, _ = tick(cursor, *moved[:1], site.append_spec(mode="snapshot"))
    assert len(remoded) == 1 and remoded[0].startswith(f"{events}@7/")  # orders: requested already
    again, _ = tick(cursor, site.merge_spec(target="warehouse/orders_v2", mode="history"), site.append_spec())
    assert len(again) == 1 and again[0] not in {f"{orders}@7", keys[0]}  # moved again at the same version

    # Moved A → B → A → B at one version: each move is a new request, the rebuild in between
    # having written the checkpoint (for B, then for A) anew.
    written = datetime(2026, 1, 1, tzinfo=UTC)
    at_b = Checkpoint(orders, 7, "source-id", "fp", site.target("orders_v2"), "merge", updated_at=written)
    checkpoints[orders] = at_b
    back, cursor = tick(cursor, site.merge_spec(), site.append_spec())
    checkpoints[orders] = replace(at_b, target=site.target(MERGE_TABLE), updated_at=written + timedelta(minutes=1))
    forth, _ = tick(cursor, *moved)
    assert len(back) == len(forth) == 1 and forth[0] not in {keys[0], back[0]}
    checkpoints = {t.name: Checkpoint(t.name, 7, "source-id", "fp", t.target, t.mode.value) for t in first.tables}

    # Definitions loaded before the move, config file after it (what a run reads): the same rebuild.
    site.write_config()
    loaded = site.config()
    site.write_config(*moved)
    now = {t.name: t for t in site.config().tables}
    stale = plan_tick(loaded, loaded.tables, versions, checkpoints, SensorCursor(), configured=now)
    assert [r.run_key for r in stale.run_requests] == keys


@pytest.mark.slow
def test_sensor_rebuilds_a_table_whose_target_the_config_moved_while_the_provider_is_quiet(site: Site) -> None:
    defs = site.definitions()
    orders = full_name(MERGE_TABLE)
    version = site.source_version(MERGE_TABLE)
    materialize(defs, dg.AssetSelection.assets(site.key(MERGE_TABLE), site.key(APPEND_TABLE)).without_checks())
    settled = _tick(defs, None)
    assert not settled.run_requests  # both at their checkpoint

    # The same code location (not reloaded): runs and the sensor read the config file afresh.
    site.write_config(site.merge_spec(target="warehouse/orders_v2"), site.append_spec())
    moved = _tick(defs, settled.cursor)

    assert [(r.run_key or "").split("/")[0] for r in moved.run_requests or []] == [f"{orders}@{version}"]
    request = (moved.run_requests or [])[0]
    assert request.run_key != f"{orders}@{version}" and request.asset_selection == [site.key(MERGE_TABLE)]
    assert not _tick(defs, moved.cursor).run_requests  # requested once

    # The requested run rebuilds the new target: the engine's no-op check does not cut it short.
    materialize(defs, dg.AssetSelection.assets(site.key(MERGE_TABLE)).without_checks())
    target = site.target("orders_v2")
    assert read_rows(DeltaTable(target)).num_rows > 0
    store = open_store(site.config().state_store)
    checkpoint = store.get_checkpoint(orders)
    assert checkpoint is not None and checkpoint.target == target and checkpoint.version == version
    assert not _tick(defs, None).run_requests  # a fresh cursor: the checkpoint now matches the config


def test_cursor_round_trips_and_tolerates_garbage() -> None:
    cursor = SensorCursor({"a.b.c": 3}, {"a.b.c": 3})
    assert SensorCursor.parse(cursor.dumps()) == cursor
    assert cursor.dumps() == '{"observed": {"a.b.c": 3}, "requested": {"a.b.c": 3}}'  # as before rebuilds existed
    moved = SensorCursor({"a.b.c": 3}, {"a.b.c": 3}, rebuilt={"a.b.c": "a.b.c@3/target@0123abcd"})
    assert SensorCursor.parse(moved.dumps()) == moved
    assert SensorCursor.parse("not json") == SensorCursor()
    assert SensorCursor.parse(None) == SensorCursor()


def test_sensor_interval_and_schedules_come_from_the_config(site: Site) -> None:
    site.write_config(
        site.merge_spec(schedule="*/10 * * * *"),
        site.append_spec(),
        defaults={"schedule": "0 * * * *"},
        sensor_interval_seconds=45,
    )
    defs = site.definitions()

    assert defs.resolve_sensor_def(SENSOR_NAME).minimum_interval_seconds == 45
    schedules = {s.cron_schedule: s for s in defs.schedules or []}  # type: ignore[union-attr]
    assert set(schedules) == {"*/10 * * * *", "0 * * * *"}
    assert schedules["*/10 * * * *"].tags == {"sharesync/table": full_name(MERGE_TABLE)}  # type: ignore[union-attr]
    assert schedules["0 * * * *"].execution_timezone == "UTC"  # type: ignore[union-attr]


@pytest.mark.slow
def test_observing_the_sources_records_their_versions_as_data_versions(site: Site) -> None:
    defs = site.definitions()
    config = site.config()
    from sharesync.pipelines.dagster import naming

    sources = [naming.source_key(t) for t in config.tables]
    result = materialize(defs, dg.AssetSelection.assets(*sources))

    observations = {
        e.asset_key.path[-1]: e.asset_observation_data.asset_observation  # type: ignore[union-attr]
        for e in result.all_events
        if e.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    }
    observed = {name: o.tags[DATA_VERSION_TAG] for name, o in observations.items()}
    assert observed == {
        MERGE_TABLE: str(site.source_version(MERGE_TABLE)),
        APPEND_TABLE: str(site.source_version(APPEND_TABLE)),
    }
    orders = observations[MERGE_TABLE].metadata
    assert orders["change_data_feed"].value is True and orders["partition_columns"].value == "region"
    assert [c.name for c in orders["dagster/column_schema"].value.columns][:2] == ["id", "region"]
    assert "description" not in orders  # the provider gave none

    # The provider describes the table (untrusted text: a line break, an escape sequence): the
    # next observation records it, one line, without them.
    DeltaTable(str(site.source_path(MERGE_TABLE))).alter.set_table_description("Orders\n\x1b[31mdaily[0m")
    again = materialize(defs, dg.AssetSelection.assets(*sources))
    described = [
        e.asset_observation_data.asset_observation.metadata  # type: ignore[union-attr]
        for e in again.all_events
        if e.event_type == dg.DagsterEventType.ASSET_OBSERVATION and e.asset_key.path[-1] == MERGE_TABLE
    ]
    assert described[0]["description"].value == "Orders [31mdaily[0m"
