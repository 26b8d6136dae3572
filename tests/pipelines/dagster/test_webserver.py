"""Smoke test: ``dagster-webserver -w workspace.yaml`` serves the assets, and their metadata once materialized.

Everything runs as a user would: the webserver is a subprocess with a temporary ``DAGSTER_HOME``;
the first materialization is launched through GraphQL as the UI's button does (run worker
``python -m dagster api execute_run``, each step in its own process — the production path), the
second is a ``dagster asset materialize --config-json`` backfill. The test reads what the UI
would show through the GraphQL API. Readiness and run completion are polled, with deadlines.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.dagster_site import MERGE_TABLE, Site

from sharesync.sync.core.timestamps import from_millis

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
STARTUP_DEADLINE = 120.0
RUN_DEADLINE = 240.0
POLL_INTERVAL = 0.25  # polling, not synchronisation: every wait below has a condition and a deadline

ASSET_NODES = "{ assetNodes { assetKey { path } groupName kinds } }"
LOCATION_STATUS = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
LAUNCH = """
mutation ($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""
RUN_STATUS = "query ($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"
LATEST_MATERIALIZATION = """
query ($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset {
      assetMaterializations(limit: 1) {
        runId
        metadataEntries {
          label
          ... on IntMetadataEntry { intValue }
          ... on FloatMetadataEntry { floatValue }
          ... on TextMetadataEntry { text }
        }
      }
    }
  }
}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Webserver:
    def __init__(self, port: int, process: subprocess.Popen[bytes]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.process = process

    def graphql(self, query: str, **variables: Any) -> dict[str, Any]:
        response = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables}, timeout=30)
        response.raise_for_status()
        body = response.json()
        assert "errors" not in body, body["errors"]
        return body["data"]  # type: ignore[no-any-return]

    def wait_until_loaded(self) -> None:
        """Poll until the HTTP server answers and the code location has loaded (bounded)."""
        deadline = time.monotonic() + STARTUP_DEADLINE
        while time.monotonic() < deadline:
            assert self.process.poll() is None, "dagster-webserver exited during startup"
            try:
                entries = self.graphql(LOCATION_STATUS)["workspaceOrError"]["locationEntries"]
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    return
            except httpx.TransportError:
                pass
            time.sleep(POLL_INTERVAL)
        raise AssertionError(f"dagster-webserver not ready within {STARTUP_DEADLINE:.0f}s")

    def launch(self, path: list[str]) -> str:
        """Launch a run of the asset at ``path`` (and its checks) as the UI's Materialize button does."""
        selector = {
            "repositoryLocationName": "sharesync",
            "repositoryName": "__repository__",
            "jobName": "__ASSET_JOB",
            "assetSelection": [{"path": path}],
        }
        answer = self.graphql(LAUNCH, params={"selector": selector, "runConfigData": {}})["launchRun"]
        assert answer["__typename"] == "LaunchRunSuccess", answer
        return str(answer["run"]["runId"])

    def wait_for_run(self, run_id: str) -> str:
        deadline = time.monotonic() + RUN_DEADLINE
        while time.monotonic() < deadline:
            status = str(self.graphql(RUN_STATUS, id=run_id)["runOrError"]["status"])
            if status in ("SUCCESS", "FAILURE", "CANCELED"):
                return status
            time.sleep(POLL_INTERVAL)
        raise AssertionError(f"run {run_id} not finished within {RUN_DEADLINE:.0f}s")


@pytest.fixture
def environment(site: Site, tmp_path: Path) -> dict[str, str]:
    site.write_config(site.merge_spec())
    home = tmp_path / "dagster_home"
    home.mkdir()
    # Runs launch at once (no daemon runs here to dequeue them); the launcher is Dagster's default.
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: dagster.core.run_coordinator\n  class: DefaultRunCoordinator\n"
    )
    return {**os.environ, "SHARESYNC_CONFIG": str(site.config_file), "DAGSTER_HOME": str(home)}


@pytest.fixture
def webserver(environment: dict[str, str], tmp_path: Path) -> Iterator[Webserver]:
    port = _free_port()
    log = (tmp_path / "webserver.log").open("wb")
    process = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=environment, stdout=log, stderr=subprocess.STDOUT,
    )
    server = Webserver(port, process)
    try:
        server.wait_until_loaded()
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _materialize(environment: dict[str, str], select: str, config: dict[str, Any] | None = None) -> None:
    # In-process execution: the same run, without a subprocess per step (a few seconds each on CI).
    run_config = {**(config or {}), "execution": {"config": {"in_process": {}}}}
    command = [str(BIN / "dagster"), "asset", "materialize", "-m", "sharesync.pipelines.dagster.definitions", "--select", select]
    command += ["--config-json", json.dumps(run_config)]
    done = subprocess.run(command, check=False, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def _latest(server: Webserver, path: list[str]) -> dict[str, Any]:
    [latest] = server.graphql(LATEST_MATERIALIZATION, path=path)["assetOrError"]["assetMaterializations"]
    return {
        e["label"]: e.get("intValue", e.get("floatValue", e.get("text"))) for e in latest["metadataEntries"]
    }


def test_webserver_shows_assets_and_materialization_metadata(
    site: Site, webserver: Webserver, environment: dict[str, str], tmp_path: Path
) -> None:
    nodes = {tuple(n["assetKey"]["path"]): n for n in webserver.graphql(ASSET_NODES)["assetNodes"]}
    path = ["sharesync", "dg", "sales", MERGE_TABLE]
    assert set(nodes) == {tuple(path), ("delta_sharing", "dg", "sales", MERGE_TABLE)}
    assert nodes[tuple(path)]["groupName"] == "dg"
    assert set(nodes[tuple(path)]["kinds"]) == {"deltasharing", "delta", "spark"}

    assert webserver.wait_for_run(webserver.launch(path)) == "SUCCESS"
    version = site.source_version(MERGE_TABLE)
    first = _latest(webserver, path)
    assert first["outcome"] == "synced" and first["source_version_to"] == version
    assert first["rows_inserted"] == first["dagster/row_count"] > 0
    assert isinstance(first["lag_seconds"], float)

    start = from_millis(site.commit_millis(MERGE_TABLE, 2)).isoformat()
    op = f"sync_dg__sales__{MERGE_TABLE}"
    _materialize(environment, "/".join(path), {"ops": {op: {"config": {"starting_timestamp": start}}}})
    backfill = _latest(webserver, path)
    assert (backfill["source_version_from"], backfill["source_version_to"]) == (2, version)
