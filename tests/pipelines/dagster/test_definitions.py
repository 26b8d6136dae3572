"""Definitions from a config: names, kinds, versions, pools and retries — built offline, fast."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.assets import DEFAULT_RETRY_POLICY, KINDS, build_sync_asset_specs
from sharesync.pipelines.dagster.code_location import load_definitions
from sharesync.sync.core.config import parse_config
from sharesync.sync.core.errors import ConfigError


def _config(**table: Any) -> Any:
    entry = {"name": "acme.sales.orders", "target": "/data/orders", "keys": ["id"], **table}
    return parse_config({"profile": "p.share", "tables": [entry]})


def _write(tmp_path: Path, endpoint: str) -> Path:
    (tmp_path / "p.share").write_text(
        json.dumps({"shareCredentialsVersion": 1, "endpoint": endpoint, "bearerToken": "tok-123456"})
    )
    config = {
        "profile": "p.share",
        "state_store": "postgresql+psycopg://sharesync:pw@db.invalid:5432/sharesync",  # never opened at load
        "tables": [
            {"name": "acme.sales.orders", "target": "warehouse/orders", "keys": ["id"], "freshness_minutes": 30},
            {"name": "acme.sales.events", "target": "warehouse/events", "mode": "append"},
        ],
    }
    path = tmp_path / "sharesync.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_one_asset_per_table_with_key_group_kinds_description_and_source_dep() -> None:
    [spec] = build_sync_asset_specs(_config())

    assert spec.key == dg.AssetKey(["sharesync", "acme", "sales", "orders"])
    assert spec.group_name == "acme"
    assert spec.kinds == KINDS == {"deltasharing", "delta", "spark"}
    assert [d.asset_key for d in spec.deps] == [dg.AssetKey(["delta_sharing", "acme", "sales", "orders"])]
    assert "acme.sales.orders" in (spec.description or "") and "merged on id" in (spec.description or "")
    assert spec.metadata["dagster/uri"] == "file:///data/orders"


def test_code_version_follows_what_shapes_the_data_only() -> None:
    base = naming.code_version(_config().tables[0])
    assert naming.code_version(_config().tables[0]) == base
    assert naming.code_version(_config(keys=["id", "region"]).tables[0]) != base
    assert naming.code_version(_config(schedule="*/5 * * * *", freshness_minutes=10).tables[0]) == base


def test_names_that_dagster_would_refuse_are_made_valid_and_unique() -> None:
    table = _config(name="my-share.sales.order items").tables[0]
    other = _config(name="my_share.sales.order_items").tables[0]

    assert naming.op_name(table) != naming.op_name(other)
    for name in (naming.op_name(table), naming.group_name(table), naming.checks_op_name(table)):
        assert re.fullmatch(r"[A-Za-z0-9_]+", name), name
    assert " " not in naming.pool(table)


def test_a_code_location_loads_whatever_characters_its_table_names_hold(tmp_path: Path) -> None:
    """Dagster names an asset's output after its key: a ``+``, ``$``, space or ``é`` there stopped
    the whole code location from loading. Such parts are renamed; names that worked keep their keys."""
    path = _write(tmp_path, "https://sharing.example.com/delta-sharing")
    config = yaml.safe_load(path.read_text())
    names = ["acme.sales.orders", "my-share.sales.order items", "s.sch.a+b", "s.sch.a$b", "s.zürich.t"]
    config["tables"] = [{"name": n, "target": f"warehouse/{i}", "keys": ["id"]} for i, n in enumerate(names)]
    path.write_text(yaml.safe_dump(config))

    repo = load_definitions(path).get_repository_def()

    keys = {k for k in repo.assets_defs_by_key if k.path[0] == "sharesync"}
    assert len(keys) == len(names)
    assert dg.AssetKey(["sharesync", "acme", "sales", "orders"]) in keys
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-]+", part) for key in keys for part in key.path), keys


def test_loading_is_offline_even_with_an_unreachable_provider_and_state_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "https://sharing.unreachable.invalid/delta-sharing")

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("loading definitions opened a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)

    defs = load_definitions(path)
    repo = defs.get_repository_def()

    assert len(repo.assets_defs_by_key) == 4  # two tables + their two sources
    sync_op = repo.assets_defs_by_key[dg.AssetKey(["sharesync", "acme", "sales", "orders"])].op
    assert sync_op.pool == "sharesync/acme.sales.orders"
    assert sync_op.retry_policy == DEFAULT_RETRY_POLICY
    assert set(sync_op.config_schema.config_type.fields) == {  # type: ignore[union-attr]
        "starting_timestamp",
        "ending_timestamp",
        "full_refresh",
        "discard_target",
    }
    checks = {k.name for k in repo.asset_graph.asset_check_keys if k.asset_key.path[-1] == "orders"}
    assert checks == {
        "row_count_matches_source",
        "freshness",
        "profile_token_expiry",
        "keys_unique",
        "schema_matches_source",
        "target_healthy",
    }


def test_a_bad_config_fails_at_load_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "sharesync.yaml"
    path.write_text(
        yaml.safe_dump({"profile": "p.share", "tables": [{"name": "a.b.c", "target": "t", "mode": "merge"}]})
    )

    with pytest.raises(ConfigError, match=r"tables\[0\].*keys"):
        load_definitions(path)


def test_another_providers_tables_have_their_own_keys_and_names_while_the_default_keeps_its_own() -> None:
    """Issue 33 §1: the same shared table from two providers is two assets; the default provider's
    (``profile:``) asset keys, op names and pools are those of a one-provider config."""
    entry = {"name": "acme.sales.orders", "keys": ["id"]}
    config = parse_config(
        {
            "profile": "p.share",
            "providers": {"partner": {"profile": "q.share"}},
            "tables": [{**entry, "target": "/data/orders"}, {**entry, "target": "/data/p", "provider": "partner"}],
        }
    )
    ours, theirs = config.tables
    alone = _config().tables[0]
    for name in (naming.asset_key, naming.source_key, naming.op_name, naming.pool, naming.group_name):
        assert name(ours) == name(alone) != name(theirs)
    assert naming.asset_key(theirs) == dg.AssetKey(["sharesync", "partner", "acme", "sales", "orders"])
    assert naming.op_name(theirs) == "sync_partner__acme__sales__orders"
    assert naming.run_key(theirs, 3) == "partner/acme.sales.orders@3"
    specs = build_sync_asset_specs(config)
    assert len({s.key for s in specs}) == 2
