"""The demo's "Try next" lines work as printed, right after the demo (issue 19).

As the README has a new user do it: ``.venv/bin/sharesync demo`` in an empty directory, with the
venv not activated (its ``bin`` is not on PATH). Then every printed command is run as printed, in
order, through the real CLI, each in a shell that first ran the printed set-up lines (activating
the venv, ``cd`` to the demo's directory), as a new terminal would: the provider it says to serve
again keeps running (as in a first terminal) while the others run (as in a second one), and the
Dagster UI is started and stopped with Ctrl+C. Each exits 0 and prints no traceback and no warning.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx
from support.shell import Service, ShellCommand, alarming, parse_commands, run_command

BIN = Path(sys.executable).parent
# Dagster's own notice on `dagster dev` (it recommends its `dg` CLI, which needs a dg project; the
# plain `dagster dev` remains Dagster's documented way to run a code location). Not ours to fix.
UPSTREAM = ("SupersessionWarning: Function `dev_command` is superseded",)


def _user_env() -> dict[str, str]:
    """The environment of a shell where the venv is not activated and no sharesync variable is set."""
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != BIN)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHARESYNC_", "DAGSTER_", "VIRTUAL_ENV"))}
    return {**env, "PATH": path, "NO_COLOR": "1", "COLUMNS": "120"}


def try_next(output: str) -> list[str]:
    """The command lines printed under "Try next" (indented; prose lines are not)."""
    lines = output.split("Try next", 1)[1].splitlines()[1:]
    return [line for line in lines if line.startswith("  ")]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _dagster_port(command: ShellCommand) -> ShellCommand:
    """`dagster dev` listens on 3000; if something else holds it here, the same command on a free port."""
    if command.program != "dagster" or _port_free(3000):
        return command
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return replace(command, argv=[*command.argv, "--port", str(port)])


def _wait_until_ui_answers(service: Service, timeout: float = 60) -> str:
    """The UI's server info, once it answers HTTP.

    Dagster logs "Serving dagster-webserver on" just before uvicorn starts listening; a Ctrl+C in
    between stops it before it served (an upstream warning about a never-awaited coroutine). A user
    opens the UI first, and so does this test.
    """
    url = re.search(r"Serving dagster-webserver on (http://\S+)", service.output)
    assert url is not None, service.output[-3000:]
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(f"{url.group(1).rstrip('/')}/server_info", timeout=5).raise_for_status().text
        except httpx.HTTPError:
            if service.process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_every_try_next_line_works_as_printed(tmp_path: Path) -> None:
    env = _user_env()
    code, output = run_command(parse_commands(f"{BIN}/sharesync demo")[0], cwd=tmp_path, env=env, timeout=300)
    assert code == 0, output
    assert alarming(output) == []
    lines = try_next(output)
    assert len(lines) >= 8, output

    prelude: list[str] = []
    services: list[Service] = []
    finished: dict[str, str] = {}
    try:
        for line in lines:
            (command,) = parse_commands(line)
            if command.program in ("source", ".", "cd"):  # what every new terminal runs first
                prelude.append(line.strip())
                continue
            command = _dagster_port(replace(command, prelude=tuple(prelude)))
            if command.ready_marker() is not None:  # runs until Ctrl+C, as in its own terminal
                services.append(Service.start(command, cwd=tmp_path, env=env))
                services[-1].wait_ready(timeout=120)
                if command.program == "dagster":
                    finished["ui"] = _wait_until_ui_answers(services[-1])
                continue
            code, output = run_command(command, cwd=tmp_path, env=env, timeout=300)
            assert code == 0, (line, output)
            assert alarming(output) == [], (line, output)
            finished[command.subcommand() or line] = output
    finally:
        stopped = [(service.command.text, *service.interrupt()) for service in reversed(services)]
    for text, code, output in stopped:
        assert code == 0, (text, output[-3000:])
        assert alarming(output, allowed=UPSTREAM) == [], (text, output[output.find("Traceback") - 500 :][:6000])
    assert [service.command.program for service in services] == ["sharesync", "dagster"]
    assert [p.split()[0] for p in prelude] == ["source", "cd"]  # the venv is not active in this shell

    # And each did what it is there for.
    assert "last error" not in finished["status"] and finished["status"].count("succeeded") == 2
    assert finished["sync"].count("up to date") == 2
    assert "2 shared tables" in finished["discover"]
    assert "demo.sales.orders @ version" in finished["preview"] and "5 rows" in finished["preview"]
    assert "Serving dagster-webserver" in stopped[0][2] and "sharesync" in stopped[0][2]
    assert "dagster_webserver_version" in finished["ui"]
