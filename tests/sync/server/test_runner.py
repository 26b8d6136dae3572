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
from support.faults import SharingServer

from sharesync.sync.protocol.wire import File

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
            SharingServer(provider_root, port=busy.port, token="busy-port-token").start()
    finally:
        busy.stop()


def _sharesync(*args: str) -> list[str]:
    return [sys.executable, "-c", "from sharesync.sync.cli.main import main; main()", *args]


TESTS = Path(__file__).resolve().parents[2]


def _faulty(*args: str) -> list[str]:
    """``sharesync`` whose ``serve`` takes the fault flags (test-only: ``support.faults.serve``)."""
    return [sys.executable, "-c", "from support.faults.serve import main; main()", *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}


def test_cli_serve_writes_a_profile_and_serves(provider_root: Path, tmp_path: Path) -> None:
    profile = tmp_path / "local.share"
    profile.write_text("{}")
    profile.chmod(0o644)  # an older profile others could read: replaced by a private one
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
        assert profile.stat().st_mode & 0o777 == 0o600  # it holds the bearer token
        assert written["endpoint"] == endpoint and written["shareCredentialsVersion"] == 1
        headers = {"Authorization": f"Bearer {written['bearerToken']}"}
        response = httpx.get(f"{endpoint}/shares/demo/all-tables", headers=headers, timeout=10)
        assert [t["name"] for t in response.json()["items"]] == ["customers", "orders"]
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=10)


def test_cli_serve_vacuumed_history_flags(provider_root: Path, tmp_path: Path) -> None:
    """The flags a provider's VACUUM is reproduced with by hand: storage 404/410 and history errors."""
    profile = tmp_path / "local.share"
    flags = ["--unchecked-presign", "--gone-file", "/no-such-fragment/", "--gone-file", ".parquet"]
    flags += ["--gone-status", "410", "--history-error", "log_truncated"]
    process = subprocess.Popen(
        _faulty("serve", str(provider_root), "--port", "0", "--profile-out", str(profile), *flags),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stdout is not None
        endpoint = process.stdout.readline().rsplit(" at ", 1)[1].strip()
        assert process.stdout.readline().strip() == f"Profile written to {profile}"
        headers = {"Authorization": f"Bearer {json.loads(profile.read_text())['bearerToken']}"}
        table = f"{endpoint}/shares/samples/schemas/all_types/tables/partitioned"
        changes = httpx.get(f"{table}/changes", params={"startingVersion": 1}, headers=headers, timeout=10)
        assert changes.status_code == 400 and changes.json()["errorCode"] == "MALFORMED_REQUEST"
        assert "the transaction log has been truncated" in changes.json()["message"]
        query = httpx.post(f"{table}/query", json={}, headers=headers, timeout=10)
        file = next(a for a in actions(query) if isinstance(a, File))
        gone = httpx.get(file.url, timeout=10)
        assert gone.status_code == 410 and "<Code>Gone</Code>" in gone.text
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=10)


def test_cli_serve_help_names_every_history_error() -> None:
    from support.faults import HISTORY_ERRORS

    done = subprocess.run(_faulty("serve", "--help"), capture_output=True, text=True, timeout=30, env=_env())
    help_text = " ".join(done.stdout.split())
    named = help_text.split("history error:", 1)[1].split(".", 1)[0]
    assert sorted(named.replace(" or ", ", ").replace(",", " ").split()) == sorted(HISTORY_ERRORS)


def test_cli_serve_answers_queries_asynchronously(provider_root: Path, tmp_path: Path) -> None:
    profile = tmp_path / "local.share"
    flags = ["--async-after-polls", "1"]
    process = subprocess.Popen(
        _sharesync("serve", str(provider_root), "--port", "0", "--profile-out", str(profile), *flags),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        endpoint = process.stdout.readline().rsplit(" at ", 1)[1].strip()
        assert process.stdout.readline().strip() == f"Profile written to {profile}"
        headers = {
            "Authorization": f"Bearer {json.loads(profile.read_text())['bearerToken']}",
            "delta-sharing-capabilities": "responseformat=parquet;asyncquery=true",
        }
        table = f"{endpoint}/shares/samples/schemas/all_types/tables/partitioned"
        submitted = httpx.post(f"{table}/query", json={"idempotencyKey": "k"}, headers=headers, timeout=10)
        query_id = submitted.json()["queryStatus"]["queryId"]
        pending = httpx.post(f"{table}/queries/{query_id}", json={}, headers=headers, timeout=10)
        assert pending.json()["queryStatus"]["status"] == "pending"
        done = httpx.post(f"{table}/queries/{query_id}", json={}, headers=headers, timeout=10)
        assert any(isinstance(a, File) for a in actions(done))
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=10)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "/does/not/exist"], "error: serve: ROOT '/does/not/exist' is not a directory"),
        (["serve", ".", "--url-ttl", "0"], "error: serve: url_ttl_seconds: Input should be greater than 0"),
        (["serve", ".", "--async-outcome", "maybe"], "Invalid value for '--async-outcome'"),
        (["serve", ".", "--async-after-polls", "-1"], "Invalid value for '--async-after-polls'"),
        (["serve", ".", "--error-rate", "0.5"], "No such option '--error-rate'"),  # a test double's, not here
    ],
)
def test_cli_serve_usage_errors_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run(_sharesync(*args), capture_output=True, text=True, timeout=30, env={**os.environ})
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "/does/not/exist"], "error: serve: ROOT '/does/not/exist' is not a directory"),
        (["serve", ".", "--error-rate", "2"], "Invalid value for '--error-rate'"),
        (["serve", ".", "--url-ttl", "0"], "error: serve: url_ttl_seconds: Input should be greater than 0"),
        (["serve", ".", "--gone-status", "403"], "error: serve: gone_status: Input should be 404 or 410"),
        (
            ["serve", ".", "--history-error", "oops"],
            "error: serve: history_error: Input should be 'table_files_missing'",
        ),
    ],
)
def test_faulty_serve_usage_errors_exit_2(args: list[str], message: str) -> None:
    done = subprocess.run(_faulty(*args), capture_output=True, text=True, timeout=30, env=_env())
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
