"""deploy/: the production instance config is valid for this Dagster, and the compose file hangs together."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


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


def test_compose_runs_postgres_spark_connect_code_server_webserver_and_daemon() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    services = compose["services"]

    assert set(services) == {"postgres", "spark-connect", "sharesync-code", "dagster-webserver", "dagster-daemon"}
    code = services["sharesync-code"]
    assert "sharesync.pipelines.dagster.definitions" in code["command"]
    assert code["environment"]["SHARESYNC_STATE_STORE"].startswith("postgresql+psycopg://")
    workspace = yaml.safe_load((DEPLOY / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["grpc_server"]["host"] == "sharesync-code"
    assert "15002:15002" in services["spark-connect"]["ports"]
