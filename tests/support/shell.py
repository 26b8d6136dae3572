"""Run shell command lines a user copies from our docs or output, as a shell would, and judge their output.

Used by the first-run tests (``tests/e2e/test_readme.py``, ``tests/e2e/test_demo_next_steps.py``):

* :func:`parse_commands` splits shell text (a README block, a printed line) into simple commands
  with shell word rules (``shlex``): ``&&``/``;``/newlines separate, a trailing ``&`` backgrounds,
  ``#`` starts a comment, ``\\`` continues a line, leading ``NAME=value`` words set the environment.
* :func:`run_command` runs one to completion; :class:`Service` runs a long-running one (a server,
  ``dagster dev``) until it says it is ready, and stops it the way Ctrl+C does (SIGINT to its
  process group).
* :func:`alarming` lists the lines a new user would be alarmed by: tracebacks and warnings.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {"&&", ";", "&"}
# A traceback; a Python warning (FutureWarning: …); a WARNING log line; a "warning:" line of ours.
_ALARMING = re.compile(r"Traceback \(most recent call last\)|\w*Warning: |\bWARNING\b|(?i:\bwarning:)")

# What a long-running command prints once it serves: it then runs until Ctrl+C.
READY_MARKERS = {
    ("sharesync", "serve"): "Press Ctrl+C to stop.",
    ("sharesync", "demo"): "until Ctrl-C",  # only with --keep-serving; otherwise the demo just ends
    ("dagster", "dev"): "Serving dagster-webserver on",
}


@dataclass(frozen=True)
class ShellCommand:
    """One simple command: ``env`` assignments, then ``argv``; ``background`` when followed by ``&``."""

    env: dict[str, str]
    argv: list[str]
    background: bool = False
    prelude: tuple[str, ...] = ()  # shell lines run first in the same shell (``source …/activate``, ``cd …``)

    @property
    def text(self) -> str:
        return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.env.items()), shlex.join(self.argv)])

    @property
    def run_argv(self) -> list[str]:
        """What to execute: the command itself, or a shell running the prelude and then it."""
        return ["bash", "-c", " && ".join([*self.prelude, self.text])] if self.prelude else self.argv

    @property
    def program(self) -> str:
        return Path(self.argv[0]).name

    def subcommand(self) -> str | None:
        """The first word after the program and its global options (``--config FILE``, ``-v``)."""
        words = iter(self.argv[1:])
        for word in words:
            if word in ("--config", "-c"):
                next(words, None)
            elif not word.startswith("-"):
                return word
        return None

    def ready_marker(self) -> str | None:
        """What it prints when ready, if it runs until interrupted (else None: it ends by itself)."""
        if self.program == "sharesync" and self.subcommand() == "demo" and "--keep-serving" not in self.argv:
            return None
        return READY_MARKERS.get((self.program, self.subcommand() or ""))


def parse_commands(text: str) -> list[ShellCommand]:
    commands: list[ShellCommand] = []
    for line in text.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="&;|()<>")
        lexer.whitespace_split = True
        words: list[str] = []
        for token in [*lexer, ";"]:  # the end of a line ends a command
            if token in {"|", "||", "(", ")", "<", ">", ">>"}:
                raise ValueError(f"not a simple command list (found {token!r}): {line!r}")
            if token not in _SEPARATORS:
                words.append(token)
            elif words:
                commands.append(_command(words, background=token == "&"))
                words = []
    return commands


def _command(words: list[str], *, background: bool) -> ShellCommand:
    env: dict[str, str] = {}
    while words and _ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return ShellCommand(env, list(words), background)


def alarming(output: str, *, allowed: tuple[str, ...] = ()) -> list[str]:
    """Lines of ``output`` with a traceback or a warning, except those containing an ``allowed`` text."""
    return [line for line in output.splitlines() if _ALARMING.search(line) and not any(a in line for a in allowed)]


def run_command(command: ShellCommand, *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Run to completion: exit code and stdout+stderr (interleaved as a terminal shows them)."""
    done = subprocess.run(
        command.run_argv, cwd=cwd, env={**env, **command.env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=timeout, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout


@dataclass
class Service:
    """A command that runs until Ctrl+C, started in its own process group (as a terminal's job)."""

    command: ShellCommand
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    _reader: threading.Thread | None = None

    @classmethod
    def start(cls, command: ShellCommand, *, cwd: Path, env: dict[str, str]) -> Service:
        process = subprocess.Popen(
            command.run_argv, cwd=cwd, env={**env, **command.env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        service = cls(command, process)
        service._reader = threading.Thread(target=service._read, daemon=True)
        service._reader.start()
        return service

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def wait_ready(self, timeout: float) -> None:
        marker = self.command.ready_marker()
        assert marker is not None, self.command.text
        deadline = time.monotonic() + timeout
        while marker not in self.output:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{self.command.text!r} never said {marker!r}:\n{self.output[-3000:]}")
            time.sleep(0.1)

    def interrupt(self, timeout: float = 60) -> tuple[int, str]:
        """Ctrl+C (SIGINT to the whole process group); exit code and everything it printed."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            raise AssertionError(f"{self.command.text!r} did not stop on Ctrl+C:\n{self.output[-3000:]}") from None
        if self._reader is not None:
            self._reader.join(timeout=10)
        return code, self.output
