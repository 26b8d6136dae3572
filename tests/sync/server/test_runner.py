"""Running the server: background thread lifecycle, restart on the same port, and ``sharesync serve``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from sharesync.sync.protocol.wire import File
from sharesync.sync.server.runner import SharingServer

from .support import ORDERS, actions


def test_restart_keeps_port_secret_and_url_validity(
    provider_root: Path, start_server: Callable[..., SharingServer]
) -> None:
    server = start_server(provider_root)
    endpoint = server.endpoint
    headers = {"Authorization": f"Bearer {server.token}"}
    file = next(
        a for a in actions(httpx.post(f"{endpoint}{ORDERS}/query", json={}, headers=headers)) if isinstance(a, File)
    )

    server.stop()
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{endpoint}/shares", headers=headers)
    server.start()
    assert server.endpoint == endpoint
    assert httpx.get(f"{endpoint}/shares", headers=headers).status_code == 200
    assert httpx.get(file.url).status_code == 200  # URLs signed before the restart still work
    server.restart()
    assert httpx.get(f"{endpoint}/shares", headers=headers).status_code == 200


def test_lifecycle_guards(provider_root: Path) -> None:
    with SharingServer(provider_root, token="sharesync-runner-token") as server, pytest.raises(RuntimeError):
        server.start()  # already running
    server.stop()  # stopping twice is harmless
    busy = SharingServer(provider_root, port=server.port).start()
    try:
        with pytest.raises(OSError):
            SharingServer(provider_root, port=busy.port, token="x" * 8).start()
    finally:
        busy.stop()


def _sharesync(*args: str) -> list[str]:
    return [sys.executable, "-c", "from sharesync.sync.cli.main import main; main()", *args]


def test_cli_serve_writes_a_profile_and_serves(provider_root: Path, tmp_path: Path) -> None:
    profile = tmp_path / "local.share"
    process = subprocess.Popen(
        _sharesync("serve", str(provider_root), "--port", "0", "--profile-out", str(profile), "--url-ttl", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # printed once the port is bound
        assert first.startswith("Serving 5 table(s) from ")
        endpoint = first.rsplit(" at ", 1)[1].strip()
        assert process.stdout.readline().strip() == f"Profile written to {profile}"
        written = json.loads(profile.read_text())
        assert written["endpoint"] == endpoint and written["shareCredentialsVersion"] == 1
        headers = {"Authorization": f"Bearer {written['bearerToken']}"}
        response = httpx.get(f"{endpoint}/shares/demo/all-tables", headers=headers, timeout=10)
        assert [t["name"] for t in response.json()["items"]] == ["customers", "orders"]
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "/does/not/exist"], "error: serve: ROOT '/does/not/exist' is not a directory"),
        (["serve", ".", "--error-rate", "2"], "Invalid value for '--error-rate'"),
        (["serve", ".", "--url-ttl", "0"], "error: serve: url_ttl_seconds: Input should be greater than 0"),
    ],
)
def test_cli_serve_usage_errors_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run(_sharesync(*args), capture_output=True, text=True, timeout=30, env={**os.environ})
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
