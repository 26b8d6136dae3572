"""The ``sharesync`` console script leaves without the interpreter's teardown (``cli.main.run``):
what it printed must still arrive whole, its exit code must be the command's, and a remote
engine's sessions must be released first — only the embedded engine may go down with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from support.spark import get_spark

from sharesync.sync.cli import main as cli_main
from sharesync.sync.cli.main import exit_code
from sharesync.sync.cli.repeat import PASSES_DONE_VARIABLE, RestartProcess, restart_marker
from sharesync.sync.core.config import SparkConfig

SHARESYNC = str(Path(sys.executable).with_name("sharesync"))


def test_output_through_a_pipe_arrives_whole_with_the_commands_exit_code(tmp_path: Path) -> None:
    helped = subprocess.run([SHARESYNC, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0 and "Commands:" in helped.stdout
    assert helped.stdout.splitlines()[-1].split()[0] == "verify"  # the last command: nothing lost

    missing = tmp_path / "nowhere.yaml"
    failed = subprocess.run(
        [SHARESYNC, "--config", str(missing), "status"], capture_output=True, text=True, check=False
    )
    assert failed.returncode == 2, failed.stderr
    assert failed.stdout == "" and failed.stderr.startswith("error: ") and str(missing) in failed.stderr


@pytest.mark.parametrize("command", ["sync", "serve", "db"])
def test_a_commands_help_exits_0_without_an_error_line(command: str) -> None:
    helped = subprocess.run([SHARESYNC, command, "--help"], capture_output=True, text=True, check=False)
    assert helped.returncode == 0, helped.stderr
    assert helped.stdout.startswith(f"Usage: sharesync {command} ") and helped.stderr == ""


@pytest.mark.parametrize(
    ("argv", "problem", "help_of"),
    [
        (["--bogus"], "No such option '--bogus'", "sharesync"),
        (["bogus"], "No such command 'bogus'", "sharesync"),
        (["sync", "--every", "5x"], "'5x' is not an interval", "sharesync sync"),
        (["sync", "--passes", "3"], "add --every INTERVAL", "sharesync sync"),
        (["sync", "--every", "0s"], "'0s' is under one second; use 1s or more", "sharesync sync"),
        (["sync", "--every", "500ms"], "'500ms' is under one second", "sharesync sync"),
        (
            ["sync", "--max-rss-mib", "512"],
            "--max-rss-mib bounds the process of --every; add --every",
            "sharesync sync",
        ),
        (["discover", "--json", "--config"], "--json and --config are two ways", "sharesync discover"),
        (["backfill"], "Missing argument 'NAME'", "sharesync backfill"),
        (["db", "bogus"], "No such command 'bogus'", "sharesync db"),
    ],
)
def test_a_usage_error_is_one_line_on_stderr_with_exit_2(argv: list[str], problem: str, help_of: str) -> None:
    run = subprocess.run([SHARESYNC, *argv], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
    assert problem in run.stderr and f"(see '{help_of} --help')" in run.stderr


def test_a_group_without_a_command_shows_its_help() -> None:
    run = subprocess.run([SHARESYNC, "db"], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "Commands:" in run.stdout + run.stderr and "upgrade" in run.stdout + run.stderr


def test_exit_codes_follow_the_interpreters_rules(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(SystemExit()) == 0
    assert exit_code(SystemExit(1)) == 1
    assert exit_code(SystemExit("something went wrong")) == 1
    assert capsys.readouterr().err == "something went wrong\n"


def test_a_remote_engines_session_is_released_when_its_engine_closes() -> None:
    from sharesync.pipelines.jobs import session as sessions
    from sharesync.pipelines.jobs.session import SparkEngine

    get_spark().stop()  # as code holding the session may: the next call must not hand it out
    embedded = get_spark()
    assert not embedded.is_stopped
    with sessions._lock:
        url = sessions._EMBEDDED.url({})  # the same engine, reached as a remote one
    engine = SparkEngine(SparkConfig(remote=url))
    remote = engine.session()
    assert remote is not embedded
    engine.close()
    assert remote.is_stopped and engine.session() is not remote  # a new one, if asked again
    assert not embedded.is_stopped and embedded.range(3).count() == 3
    engine.close()


class _Executed(Exception):
    def __init__(self, path: str, argv: list[str], env: dict[str, str]) -> None:
        self.path, self.argv, self.env = path, argv, env


def test_a_restart_starts_from_the_environment_the_command_started_with(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass exports its config's storage settings (secrets too); the fresh process must read
    its own config's, not inherit the old ones."""
    monkeypatch.setenv("SHARESYNC_TEST_KEPT", "from the caller")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY", raising=False)

    def command(*args: object, **kwargs: object) -> NoReturn:
        os.environ["AWS_SECRET_ACCESS_KEY"] = "exported by the pass"
        raise RestartProcess(4, "the config's storage settings changed")

    def execve(path: str, argv: list[str], env: dict[str, str]) -> NoReturn:
        raise _Executed(path, argv, env)

    monkeypatch.setattr(cli_main, "main", command)
    monkeypatch.setattr(cli_main.os, "execve", execve)
    monkeypatch.setattr(cli_main.logging, "shutdown", lambda: None)  # pytest's handlers stay open
    try:
        with pytest.raises(_Executed) as executed:
            cli_main.run()
    finally:
        os.environ.pop("AWS_SECRET_ACCESS_KEY", None)

    assert executed.value.path == sys.executable
    assert executed.value.argv == [sys.executable, *sys.orig_argv[1:]]  # the same command
    assert "AWS_SECRET_ACCESS_KEY" not in executed.value.env
    assert executed.value.env["SHARESYNC_TEST_KEPT"] == "from the caller"
    assert executed.value.env[PASSES_DONE_VARIABLE] == restart_marker(4)  # numbered on from pass 5
