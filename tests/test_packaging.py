"""The three code folders install under the ``sharesync`` namespace and nowhere else."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"sync": "sharesync.sync", "pipelines": "sharesync.pipelines", "state": "sharesync.state"}


def _run(code: str) -> subprocess.CompletedProcess[str]:
    # -I: no PYTHONPATH, no user site, no script directory; the venv's install is all there is.
    return subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, cwd="/", check=False)


@pytest.mark.parametrize("name", sorted(FOLDERS))
def test_generic_top_level_names_are_not_importable(name: str) -> None:
    result = _run(f"import {name}")
    assert result.returncode != 0
    assert f"No module named '{name}'" in result.stderr


def test_namespaced_packages_are_importable() -> None:
    result = _run("import sharesync.sync.protocol.client, sharesync.state, sharesync.pipelines.run.sync_pass; print('ok')")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "ok"


def test_declared_packages_are_exactly_the_folders_on_disk() -> None:
    """A new sub-package left out of pyproject's list would be missing from a wheel (not from -e)."""
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {package: folder for folder, package in FOLDERS.items()}
    on_disk = {
        ".".join((FOLDERS[init.relative_to(REPO).parts[0]], *init.relative_to(REPO).parts[1:-1]))
        for folder in FOLDERS
        for init in (REPO / folder).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk
