"""``sharesync sync --every``: passes in one process against a real provider.

The provider changes between passes from inside the loop: the tests wrap the command's
``run_passes`` so that the test's commit happens after pass 1 ends and before pass 2 starts,
with the real schedule, passes and engine (no sleeping to line things up).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.verify import assert_merge_target_matches, source_version

from sharesync.pipelines.jobs.session import SparkEngine
from sharesync.state import open_store
from sharesync.sync.cli import syncing

CLI = [sys.executable, "-m", "sharesync.sync.cli.main"]


def _between_passes(monkeypatch: pytest.MonkeyPatch, after: dict[int, Callable[[], None]]) -> None:
    """Run ``after[n]()`` once pass ``n`` is done (the real loop and passes otherwise), the passes
    back to back: the tests give ``--every 1s``, the shortest interval the command takes."""
    real = syncing.run_passes

    def run_passes(run_pass: Callable[[int], None], every: float, stop: Any, **kwargs: Any) -> int:
        def wrapped(number: int) -> None:
            run_pass(number)
            if number in after:
                after[number]()

        return real(wrapped, 0, stop, **kwargs)

    monkeypatch.setattr(syncing, "run_passes", run_passes)


def test_each_pass_applies_what_the_provider_committed_since_in_one_engine(
    workspace: Workspace, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.table("m", rows=30)
    config = workspace.config(workspace.spec("m"))
    sessions: list[object] = []  # every session a job of any pass was handed
    real = SparkEngine.session

    def recording(engine: SparkEngine) -> Any:
        sessions.append(real(engine))
        return sessions[-1]

    monkeypatch.setattr(SparkEngine, "session", recording)
    _between_passes(monkeypatch, {1: lambda: workspace.commit("m", 3, seed=7)})
    run = cli("--config", str(workspace.config_file), "sync", "--every", "1s", "--passes", "3")

    assert run.code == 0, run.err
    lines = [line for line in run.out.splitlines() if " UTC pass " in line]
    assert [line.split(" UTC ")[1].split(" (")[0] for line in lines] == [
        "pass 1: 1 synced",
        "pass 2: 1 synced",
        "pass 3: 1 up to date",
    ]
    latest = source_version(workspace.path("m"))
    checkpoint = open_store(config.state_store).get_checkpoint(workspace.name("m"))
    assert checkpoint is not None and checkpoint.version == latest
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], latest)
    assert len(sessions) >= 2 and all(each is sessions[0] for each in sessions)  # one session for every pass


def test_a_pass_that_cannot_start_is_reported_and_the_next_one_tries_again(
    workspace: Workspace, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.table("m", rows=10)
    workspace.config(workspace.spec("m"))
    good = workspace.config_file.read_text()

    def break_config() -> None:
        workspace.config_file.write_text(good + "surprise: 1\n")
        workspace.commit("m", 1, seed=3)

    _between_passes(monkeypatch, {1: break_config, 2: lambda: workspace.config_file.write_text(good)})
    run = cli("--config", str(workspace.config_file), "sync", "--every", "1s", "--passes", "3")

    assert run.code == 0, run.err  # the last pass's code
    assert run.err.count("error: pass 2:") == 1 and "surprise" in run.err and "the next pass tries again" in run.err
    assert "Traceback" not in run.err
    assert " UTC pass 3: 1 synced" in run.out  # pass 2's commit, applied by pass 3


def test_a_first_pass_that_cannot_start_exits_2(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    workspace.table("m", rows=10)
    workspace.config(workspace.spec("m"), profile=str(workspace.root / "missing.share"))

    run = cli("--config", str(workspace.config_file), "sync", "--every", "1h")

    assert run.code == 2
    assert run.err.startswith("error: ") and "missing.share" in run.err and " UTC pass " not in run.out


def test_sigterm_between_passes_stops_the_loop_with_the_last_pass_code(workspace: Workspace) -> None:
    workspace.table("m", rows=10)
    workspace.config(workspace.spec("m"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARESYNC_")}
    process = subprocess.Popen(
        [*CLI, "--config", str(workspace.config_file), "sync", "--every", "1h"],
        cwd=workspace.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()  # the pass's line: it then waits for the next hour
        assert " UTC pass 1: 1 synced" in first, first
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, err
    assert "SIGTERM: stopping after this pass" in err and " UTC pass 2" not in out
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], 0)


@pytest.mark.parametrize(
    "launcher",
    [[str(Path(sys.executable).parent / "sharesync")], CLI],
    ids=["console-script", "python-m"],
)
def test_a_process_above_its_memory_bound_restarts_itself_between_passes(
    workspace: Workspace, launcher: list[str]
) -> None:
    workspace.table("m", rows=10)
    workspace.config(workspace.spec("m"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHARESYNC_")}
    done = subprocess.run(
        [
            *launcher,
            "--config",
            str(workspace.config_file),
            "sync",
            "--every",
            "1s",  # the shortest interval taken; a pass of a table with nothing new takes about as long
            "--passes",
            "3",
            "--max-rss-mib",
            "1",
        ],
        cwd=workspace.root,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert done.returncode == 0, done.stderr
    passes = [line.split(" UTC ")[1].split(":")[0] for line in done.stdout.splitlines() if " UTC pass " in line]
    assert passes == ["pass 1", "pass 2", "pass 3"]  # numbered on across the restarts, and stopped at 3
    restarts = [line for line in done.stderr.splitlines() if line.startswith("restarting the process")]
    assert [r.split(":")[0] for r in restarts] == [
        "restarting the process after pass 1",
        "restarting the process after pass 2",
    ]
    assert "above --max-rss-mib 1" in restarts[0]
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], 0)


def test_each_pass_reads_the_profile_again(
    workspace: Workspace, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.table("m", rows=10)
    profile = workspace.root / "rotating.share"
    good = json.loads(workspace.server.profile_path.read_text())  # type: ignore[union-attr]
    profile.write_text(json.dumps(good))
    workspace.config(workspace.spec("m"), profile=str(profile))

    def revoke() -> None:
        profile.write_text(json.dumps({**good, "bearerToken": "revoked-token-0123456789"}))
        workspace.commit("m", 1, seed=5)

    _between_passes(monkeypatch, {1: revoke, 2: lambda: profile.write_text(json.dumps(good))})
    run = cli("--config", str(workspace.config_file), "sync", "--every", "1s", "--passes", "3")

    assert run.code == 0, run.err
    summaries = [line.split(" UTC ")[1].split(" (")[0] for line in run.out.splitlines() if " UTC pass " in line]
    assert summaries == ["pass 1: 1 synced", "pass 2: 1 failed", "pass 3: 1 synced"]
    assert "401" in run.err and "revoked-token" not in run.err + run.out
