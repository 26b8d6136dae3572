"""Run ``sharesync`` in-process and keep its exit code and output (the ``cli`` fixture)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest


@dataclass(frozen=True)
class CliResult:
    """What an in-process ``sharesync`` run printed, and its exit code."""

    code: int
    out: str
    err: str


def cli_runner(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    from sharesync.sync.cli.main import main

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
