"""What the suite installs for itself on first need, once, into ``.engines/<name>`` (git-ignored).

The README's test command is all a new machine runs, so a test that needs a tool from a package
registry (Spark and the Delta jars, the azurite emulator, …) installs it on first need with
:func:`install_once`: the install command runs in ``.engines/<name>`` under a file lock, so that
of the two test workers exactly one installs while the other waits and then finds it done. A
failed install raises :class:`InstallFailed` naming the command and ending with its output.

A new emulator needs one call, e.g. a Go one::

    home = ENGINES / "gcs"
    install_once("gcs", ["go", "install", "github.com/fsouza/fake-gcs-server@<version>"],
                 ready="bin/fake-gcs-server", env={"GOBIN": str(home / "bin")})
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from filelock import FileLock

PROJECT = Path(__file__).resolve().parents[2]
ENGINES = PROJECT / ".engines"


class InstallFailed(RuntimeError):
    """An install command ended with an error (a missing tool, no network, …)."""


def install_once(
    name: str,
    command: Sequence[str],
    *,
    ready: str | None = None,
    env: Mapping[str, str] | None = None,
    echo: Callable[[str], None] | None = None,
) -> Path:
    """``.engines/<name>`` once ``command`` (run there) has filled it; the command's lines go to ``echo``.

    ``ready`` (a path under it) marks a finished install: when it exists nothing runs. Without it the
    command runs every time, under the lock — for an install that checks itself (``fetch.sh``)."""
    home = ENGINES / name
    if ready is not None and (home / ready).exists():
        return home
    home.mkdir(parents=True, exist_ok=True)
    with FileLock(str(ENGINES / f"{name}.lock")):
        if ready is None or not (home / ready).exists():
            _run(command, home, {**os.environ, **(env or {})}, echo or (lambda _line: None))
    if ready is not None and not (home / ready).exists():
        raise InstallFailed(f"{' '.join(command)} ended without making {home / ready}")
    return home


def _run(command: Sequence[str], cwd: Path, env: Mapping[str, str], echo: Callable[[str], None]) -> None:
    try:
        process = subprocess.Popen(
            list(command), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    except FileNotFoundError:
        raise InstallFailed(f"'{command[0]}' is not installed (needed to run: {' '.join(command)})") from None
    assert process.stdout is not None
    lines: list[str] = []
    with process:
        for line in process.stdout:
            lines.append(line.rstrip())
            echo(line.rstrip())
        code = process.wait()
    if code != 0:
        tail = "\n".join(lines[-30:])
        raise InstallFailed(f"{' '.join(command)} (in {cwd}) exited {code}:\n{tail}")
