"""deploy/: the production Dagster instance config is valid for this Dagster, and the workspace finds the code server."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def test_dagster_yaml_passes_the_instance_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    # The loader Dagster itself runs on $DAGSTER_HOME/dagster.yaml (schema + env), without opening storage.
    from dagster._core.instance.config import dagster_instance_config

    for name in ("DAGSTER_PG_HOST", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB"):
        monkeypatch.setenv(name, "x")

    config, _ = dagster_instance_config(str(DEPLOY))

    assert set(config["storage"]) == {"postgres"}
    limits = config["concurrency"]["runs"]["tag_concurrency_limits"]
    assert {"key": "sharesync/table", "value": {"applyLimitPerUniqueValue": True}, "limit": 1} in limits
    assert config["concurrency"]["pools"]["default_limit"] == 1
    assert config["run_retries"] == {"enabled": True, "max_retries": 2, "retry_on_asset_or_op_failure": False}


def test_workspace_loads_the_code_server_both_deployments_name_sharesync_code() -> None:
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    server = workspace["load_from"][0]["grpc_server"]
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = {
        doc["metadata"]["name"]: doc
        for doc in yaml.safe_load_all((DEPLOY / "kubernetes" / "sharesync.yaml").read_text())
        if doc["kind"] == "Service"
    }

    assert server["host"] == "sharesync-code"
    assert server["host"] in compose["services"]
    assert [p["port"] for p in services[server["host"]]["spec"]["ports"]] == [server["port"]]
