"""A provider that refuses the connection says so at once: its first failure is announced (a warning
naming the provider, its address and the retry to come) and so is every retry, on stderr in the CLI,
instead of a silent wait for the whole retry budget. The provider is a closed loopback port."""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.monotonic import FakeClock

from sharesync.sync.core.errors import ConnectFailed
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import parse_profile
from sharesync.sync.protocol.retry import RetryPolicy

SHARESYNC = str(Path(sys.executable).with_name("sharesync"))


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released: connecting to it is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_each_retry_of_a_refused_connection_is_announced_as_it_happens(caplog: pytest.LogCaptureFixture) -> None:
    origin = f"http://127.0.0.1:{closed_port()}"
    profile = parse_profile({"shareCredentialsVersion": 1, "endpoint": f"{origin}/ds", "bearerToken": "t-123456"})
    clock = FakeClock()
    notices: list[tuple[int, str]] = []  # (sleeps before the notice, its text): announced before each wait

    class Recorder(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notices.append((len(clock.sleeps), record.getMessage()))

    retry = RetryPolicy(max_attempts=5, sleep=clock.sleep, clock=clock)
    recorder = Recorder(logging.WARNING)
    logging.getLogger("sharesync.sync.protocol.retry").addHandler(recorder)
    try:
        with SharingClient(profile, retry=retry, provider="partner") as client, pytest.raises(ConnectFailed) as caught:
            client.list_shares()
    finally:
        logging.getLogger("sharesync.sync.protocol.retry").removeHandler(recorder)

    assert [sleeps for sleeps, _ in notices] == [0, 1, 2, 3], "a retry was not announced before its wait"
    for attempt, (_, text) in enumerate(notices, start=2):
        assert re.fullmatch(
            rf"provider partner \({origin}\): connection refused; retry {attempt} of 5 in [\d.]+ s", text
        )
    assert str(caught.value).startswith(f"list shares: connection refused ({origin}; ConnectError")
    assert caught.value.reason == "connection refused"


def test_the_cli_shows_one_line_per_retry_on_stderr(tmp_path: Path) -> None:
    origin = f"http://127.0.0.1:{closed_port()}"
    (tmp_path / "partner.share").write_text(
        f'{{"shareCredentialsVersion": 1, "endpoint": "{origin}/ds", "bearerToken": "t-123456"}}'
    )
    config = tmp_path / "sharesync.yaml"
    config.write_text("providers:\n  partner: {profile: ./partner.share, retry_max_attempts: 3}\n")
    run = subprocess.run(
        [SHARESYNC, "--config", str(config), "discover"], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert run.returncode != 0
    retries = [line for line in run.stderr.splitlines() if "; retry " in line]
    assert len(retries) == 2, run.stderr
    for attempt, line in enumerate(retries, start=2):
        assert re.search(rf"provider partner \({origin}\): connection refused; retry {attempt} of 3 in [\d.]+ s$", line)
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and f"connection refused ({origin}" in errors[0], run.stderr
