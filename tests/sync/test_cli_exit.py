"""The ``sharesync`` console script leaves without the interpreter's teardown (``cli.main.run``):
what it printed must still arrive whole, its exit code must be the command's, and a remote
engine's sessions must be released first — only the embedded engine may go down with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sharesync.pipelines.jobs.session import get_spark, release_remote_sessions
from sharesync.sync.cli.main import exit_code
from sharesync.sync.core.config import SparkConfig

SHARESYNC = str(Path(sys.executable).with_name("sharesync"))


def test_output_through_a_pipe_arrives_whole_with_the_commands_exit_code(tmp_path: Path) -> None:
    helped = subprocess.run([SHARESYNC, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and "Commands:" in helped.stdout
    assert helped.stdout.splitlines()[-1].split()[0] == "verify"  # the last command: nothing lost

    missing = tmp_path / "nowhere.yaml"
    failed = subprocess.run([SHARESYNC, "--config", str(missing), "status"], capture_output=True, text=True, check=False)
    assert failed.returncode == 2, failed.stderr
    assert failed.stdout == "" and failed.stderr.startswith("error: ") and str(missing) in failed.stderr


@pytest.mark.parametrize("command", ["sync", "serve", "db"])
def test_a_commands_help_exits_0_without_an_error_line(command: str) -> None:
    helped = subprocess.run([SHARESYNC, command, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith(f"Usage: sharesync {command} ") and helped.stderr == ""


def test_exit_codes_follow_the_interpreters_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(SystemExit()) == 0
    assert exit_code(SystemExit(1)) == 1
    assert exit_code(SystemExit("something went wrong")) == 1
    assert capsys.readouterr().err == "something went wrong\n"


def test_remote_sessions_are_released_and_the_embedded_one_kept() -> None:
    from sharesync.pipelines.jobs import session as sessions

    get_spark().stop()  # as code holding the session may: the next get_spark must not hand it out
    embedded = get_spark()
    assert not embedded.is_stopped
    with sessions._lock:
        url = sessions._embedded_url()  # the same engine, reached as a remote one
    remote = get_spark(SparkConfig(remote=url))
    assert remote is not embedded
    release_remote_sessions()
    assert remote.is_stopped and get_spark(SparkConfig(remote=url)) is not remote  # a new one, if asked again
    assert not embedded.is_stopped and embedded.range(3).count() == 3
    release_remote_sessions()
