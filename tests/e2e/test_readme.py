"""The README's and the docs' shell blocks, copied as written, print nothing alarming (issue 19).

Every ```bash block of README.md, then of each page under docs/ (where the README's sections moved,
issue 30), is split into simple commands (shell word rules); the ones that
are safe to run here are picked by an explicit allow-list of command prefixes (the demo,
``status``, ``discover``, ``preview``, ``serve``); the rest (creating a venv, ``pip install``, the
test suite, ``dagster dev``) are skipped. The safe ones run in order, in one empty directory per
file (a page is read on its own), as
a user of a fresh, not activated venv would type them there: ``.venv`` is the project's venv,
and its ``bin`` is not on PATH. A command ending in ``&`` runs in the background until its block
ends; a server in the foreground (``serve``) runs until it is ready, then gets Ctrl+C. Each must
exit 0 with no traceback and no warning in its stdout or stderr.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from support.shell import Service, ShellCommand, alarming, parse_commands, run_command

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
# Every page, not a list: a page added later with a shell block is run too.
PAGES = sorted((REPO / "docs").rglob("*.md"))
VENV = Path(sys.executable).parent.parent
SAFE_PREFIXES = ("sharesync demo", "sharesync status", "sharesync discover", "sharesync preview", "sharesync serve")


def bash_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", markdown, flags=re.DOTALL | re.MULTILINE)


def is_safe(command: ShellCommand) -> bool:
    """By the program's name and its subcommand (global options such as ``--config FILE`` skipped)."""
    return f"{command.program} {command.subcommand()}".startswith(SAFE_PREFIXES)


def _user_env() -> dict[str, str]:
    bin_dir = VENV / "bin"
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != bin_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHARESYNC_", "DAGSTER_", "VIRTUAL_ENV"))}
    return {**env, "PATH": path, "NO_COLOR": "1", "COLUMNS": "120"}


def _found(command: ShellCommand, cwd: Path, env: dict[str, str]) -> bool:
    program = command.argv[0]
    return (cwd / program).exists() if "/" in program else shutil.which(program, path=env["PATH"]) is not None


def _check(text: str, code: int, output: str) -> None:
    assert code == 0, f"README command {text!r} exited {code}:\n{output[-3000:]}"
    assert alarming(output) == [], f"README command {text!r} printed:\n{output[-3000:]}"


def run_block(block: str, cwd: Path, env: dict[str, str], ran: list[str]) -> None:
    background: list[Service] = []
    try:
        for command in parse_commands(block):
            if not is_safe(command):
                continue
            assert _found(command, cwd, env), f"README command {command.text!r}: not found as written (venv not active)"
            ran.append(command.text)
            if command.ready_marker() is None:
                _check(command.text, *run_command(command, cwd=cwd, env=env, timeout=300))
                continue
            service = Service.start(command, cwd=cwd, env=env)
            service.wait_ready(timeout=300)
            if command.background:
                background.append(service)
            else:  # a server typed in the foreground: it serves, then the user stops it
                _check(command.text, *service.interrupt())
    finally:
        stopped = [(s.command.text, *s.interrupt()) for s in reversed(background)]
    for text, code, output in stopped:
        _check(text, code, output)


def test_readme_shell_blocks_run_cleanly(tmp_path: Path) -> None:
    blocks = bash_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "README.md has no ```bash blocks"
    (tmp_path / ".venv").symlink_to(VENV, target_is_directory=True)
    env, ran = _user_env(), []
    for block in blocks:
        run_block(block, tmp_path, env, ran)
    assert any(text.endswith("sharesync demo") for text in ran), ran  # the first command of the README
    ran_in_docs: list[str] = []
    for page in PAGES:
        page_blocks = bash_blocks(page.read_text(encoding="utf-8"))
        if not page_blocks:
            continue
        cwd = tmp_path / "docs" / page.relative_to(REPO / "docs").with_suffix("")
        cwd.mkdir(parents=True)
        (cwd / ".venv").symlink_to(VENV, target_is_directory=True)
        for block in page_blocks:
            run_block(block, cwd, env, ran_in_docs)
    # docs/dagster.md's first command (the README's "Dagster" section until issue 30 moved it there)
    assert ".venv/bin/sharesync demo --keep-serving" in ran_in_docs, ran_in_docs


def test_the_allow_list_is_what_it_says() -> None:
    picked = [c.text for c in parse_commands(
        "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/sharesync demo\n"
        ".venv/bin/pytest -m 'not slow'\n"
        "sharesync demo --keep-serving &   # comment\n"
        "sharesync --config x.yaml status --json; sharesync sync; sharesync reset t\n"
        "SHARESYNC_CONFIG=x.yaml dagster dev -w workspace.yaml\n"
        "sharesync serve root --port 0 \\\n  --profile-out p.share"
    ) if is_safe(c)]  # fmt: skip
    assert picked == [
        ".venv/bin/sharesync demo",
        "sharesync demo --keep-serving",
        "sharesync --config x.yaml status --json",
        "sharesync serve root --port 0 --profile-out p.share",
    ]
