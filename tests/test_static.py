"""Static checks the suite enforces: ruff, and mypy strict on the installed package names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("sync", "pipelines", "state")


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_ruff_is_clean() -> None:
    result = subprocess.run([_tool("ruff"), "check", "."], capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 0, result.stdout[-4000:]


@pytest.mark.slow
def test_mypy_strict_is_clean(tmp_path: Path) -> None:
    # mypy does not follow setuptools' editable-install finder, so it reads the folders through
    # a sharesync/ directory of links: module names are then the installed ones.
    namespace = tmp_path / "sharesync"
    namespace.mkdir()
    for folder in FOLDERS:
        (namespace / folder).symlink_to(REPO / folder, target_is_directory=True)
    packages = [arg for folder in FOLDERS for arg in ("-p", f"sharesync.{folder}")]
    result = subprocess.run(
        [_tool("mypy"), "--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(tmp_path / "cache"), *packages],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:]


def test_code_cites_no_file_outside_the_repository() -> None:
    """A reader of an installed package has no ``shared/`` folder: cite the spec section instead."""
    outside = ("shared/spec", "ENGINE-NOTES", "STYLE.md")
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for folder in FOLDERS
        for path in sorted((REPO / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if any(name in line for name in outside)
    ]
    assert offenders == []


MAX_LINES = 400


def test_no_module_is_over_400_lines() -> None:
    """Issue 30 §3: a module over 400 lines is doing more than one job; split it along its seams.

    The package code, the benchmark (bench/) and the tests' shared helpers (tests/support); test
    modules themselves are lists of independent cases, read one case at a time."""
    over = {
        path.relative_to(REPO).as_posix(): lines
        for folder in (*FOLDERS, "bench", "tests/support")
        for path in sorted((REPO / folder).rglob("*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert over == {}, f"over {MAX_LINES} lines: {over}"


def test_no_two_modules_share_a_file_name() -> None:
    """Issue 30 §3: a file name says one job, so a newcomer's search for it finds one module."""
    seen: dict[str, list[str]] = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            if path.name != "__init__.py":
                seen.setdefault(path.name, []).append(path.relative_to(REPO).as_posix())
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
