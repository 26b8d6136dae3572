"""A test site for the Dagster layer: provider tables, a running server, a config, definitions.

``Site`` wraps what a test needs around :func:`sharesync.pipelines.dagster.code_location.build_definitions`, so a
test reads as "write a config, build defs, materialize, look at the events".
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from deltalake import DeltaTable

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.code_location import build_definitions
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.sync.core.config import SharesyncConfig, load_config
from sharesync.sync.server.samples import apply_random_commits, table_path
from support.faults import SharingServer

SHARE, SCHEMA = "dg", "sales"
MERGE_TABLE = "orders"  # partitioned, keyed on id
APPEND_TABLE = "events"  # not partitioned
# Tests must not wait 30 s between attempts: one immediate retry.
FAST_RETRY = dg.RetryPolicy(max_retries=1)


def full_name(table: str) -> str:
    return f"{SHARE}.{SCHEMA}.{table}"


class Site:
    """One test's provider copy, server, config file and state, all under ``root``."""

    def __init__(self, root: Path, provider: Path, server: SharingServer) -> None:
        self.root = root
        self.provider = provider
        self.server = server
        self.config_file = root / "sharesync.yaml"

    # -- provider side

    def source_path(self, table: str) -> Path:
        return table_path(self.provider, SHARE, SCHEMA, table)

    def source_version(self, table: str) -> int:
        return DeltaTable(str(self.source_path(table))).version()

    def commit_millis(self, table: str, version: int) -> int:
        """When ``version`` was committed, from the provider's Delta log (epoch ms)."""
        history = DeltaTable(str(self.source_path(table))).history()
        return next(int(h["timestamp"]) for h in history if int(h["version"]) == version)

    def commit(self, table: str, n: int, seed: int) -> list[str]:
        return apply_random_commits(self.source_path(table), random.Random(seed), n)

    # -- recipient side

    def target(self, table: str) -> str:
        return str(self.root / "warehouse" / table)

    @staticmethod
    def merge_spec(**extra: Any) -> dict[str, Any]:
        return {"name": full_name(MERGE_TABLE), "target": f"warehouse/{MERGE_TABLE}", "keys": ["id"], **extra}

    @staticmethod
    def append_spec(**extra: Any) -> dict[str, Any]:
        return {"name": full_name(APPEND_TABLE), "target": f"warehouse/{APPEND_TABLE}", "mode": "append", **extra}

    def write_config(self, *tables: Mapping[str, Any], profile: Path | None = None, **top: Any) -> Path:
        profile = profile or self.server.profile_path
        assert profile is not None
        raw = {
            "profile": str(profile),
            "state_store": "sqlite:///state/state.db",
            "staging_dir": "staging",
            "tables": [dict(t) for t in (tables or (self.merge_spec(), self.append_spec()))],
            **top,
        }
        self.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        return self.config_file

    def config(self) -> SharesyncConfig:
        return load_config(self.config_file)

    def resource(self) -> SharesyncResource:
        return SharesyncResource(config_path=str(self.config_file))

    def definitions(self, **options: Any) -> dg.Definitions:
        if not self.config_file.exists():
            self.write_config()
        options.setdefault("retry_policy", FAST_RETRY)
        return build_definitions(self.config(), self.resource(), **options)

    def table_config(self, table: str) -> Any:
        return self.config().table(full_name(table))

    def key(self, table: str) -> dg.AssetKey:
        return naming.asset_key(self.table_config(table))

    def op(self, table: str) -> str:
        return naming.op_name(self.table_config(table))


def materialize(
    defs: dg.Definitions,
    selection: dg.AssetSelection,
    *,
    run_config: Mapping[str, Any] | None = None,
    instance: dg.DagsterInstance | None = None,
    raise_on_error: bool = True,
) -> dg.ExecuteInProcessResult:
    """In-process materialization of ``selection`` out of ``defs`` (its resources included)."""
    return dg.materialize(
        [*(defs.assets or ()), *(defs.asset_checks or ())],  # type: ignore[list-item]
        selection=selection,
        resources=dict(defs.resources or {}),
        run_config=dict(run_config or {}),
        instance=instance,
        raise_on_error=raise_on_error,
    )


def materialization(result: dg.ExecuteInProcessResult, key: dg.AssetKey) -> dict[str, Any]:
    """The raw values of the one materialization of ``key`` in ``result``."""
    events = [e for e in result.get_asset_materialization_events() if e.asset_key == key]
    assert len(events) == 1, f"expected one materialization of {key}, got {len(events)}"
    materialized = events[0].materialization
    return {"_data_version": materialized.tags.get("dagster/data_version") if materialized.tags else None} | {
        k: v.value for k, v in materialized.metadata.items()
    }


def check_results(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], Any]:
    """``(asset key path, check name) -> AssetCheckEvaluation`` of every check that ran."""
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def event_texts(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> str:
    """Every stored event of the runs, serialised: what a person could ever see of them."""
    return "\n".join(dg.serialize_value(record) for run_id in run_ids for record in instance.all_logs(run_id))
