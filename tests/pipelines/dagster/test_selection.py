"""Dagster over ``include:`` patterns on two providers (issue 33 §2): new tables become assets on reload.

The code location lists the selected shares when it loads; the sensor lists them on each tick
and says in its log which tables are new at the provider (a reload adds their assets) or removed
there (no run is requested for them). Provider tables are written by deltalake.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable

import dagster as dg
import pytest
import yaml
from deltalake import DeltaTable
from support.dagster_site import SCHEMA, SHARE, Site, materialize
from support.faults import SharingServer

from sharesync.pipelines.dagster.code_location import load_definitions
from sharesync.pipelines.dagster.sensors import SENSOR_NAME
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.server.samples import create_sample_table, table_path

pytestmark = pytest.mark.slow  # materializes through the engine


def test_pattern_tables_of_two_providers_are_assets_and_the_sensor_tells_what_came_and_went(
    site: Site, start_server: Callable[..., SharingServer]
) -> None:
    partner_root = site.root / "partner-provider"
    for name in ("one", "two"):
        create_sample_table(table_path(partner_root, "p", "x", name), rows=4, seed=9)
    partner = start_server(partner_root)
    raw = {
        "profile": str(site.server.profile_path),
        "providers": {"partner": {"profile": str(partner.profile_path)}},
        "state_store": "sqlite:///state/state.db",
        "staging_dir": "staging",
        "include": [
            {"pattern": f"{SHARE}.{SCHEMA}.*", "target": "warehouse/{table}", "keys": ["id"]},
            {"pattern": "p.*.*", "provider": "partner", "target": "warehouse/{provider}/{table}", "mode": "append"},
        ],
    }
    site.config_file.write_text(yaml.safe_dump(raw), encoding="utf-8")

    defs = load_definitions(site.config_file)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys() if k.path[0] == "sharesync"}
    assert keys == {"sharesync/dg/sales/orders", "sharesync/dg/sales/events", "sharesync/partner/p/x/one",
                    "sharesync/partner/p/x/two"}  # fmt: skip
    materialize(defs, dg.AssetSelection.groups("dg", "partner__p").without_checks())
    assert read_rows(DeltaTable(str(site.root / "warehouse" / "partner" / "two"))).num_rows == 4

    create_sample_table(table_path(site.provider, SHARE, SCHEMA, "fresh"), rows=3, seed=4)  # a table appears …
    shutil.move(table_path(partner_root, "p", "x", "two"), site.root / "unshared")  # … and one goes
    context = dg.build_sensor_context(resources=dict(defs.resources or {}))
    lines: list[str] = []
    tick_log = logging.Handler()
    tick_log.emit = lambda record: lines.append(record.getMessage())  # type: ignore[method-assign]
    context.log.addHandler(tick_log)  # the tick's log, as the UI shows it
    tick = defs.resolve_sensor_def(SENSOR_NAME)(context)
    said = "\n".join(lines)
    assert "dg.sales.fresh: new at the provider; it becomes an asset when the code location is reloaded" in said
    assert "partner/p.x.two: removed at provider; its target and checkpoint are kept" in said
    assert isinstance(tick, dg.SensorResult)
    assert all("p.x.two" not in (r.run_key or "") for r in tick.run_requests or [])

    reloaded = load_definitions(site.config_file)  # what a reload of the code location does
    fresh = dg.AssetKey(["sharesync", "dg", "sales", "fresh"])
    assert fresh in reloaded.resolve_asset_graph().get_all_asset_keys()
    assert (
        dg.AssetKey(["sharesync", "partner", "p", "x", "two"])
        not in reloaded.resolve_asset_graph().get_all_asset_keys()
    )
    materialize(reloaded, dg.AssetSelection.assets(fresh).without_checks())
    assert read_rows(DeltaTable(str(site.root / "warehouse" / "fresh"))).num_rows == 3
