"""Helpers shared by the state tests, importable as ``support.state`` (also from spawned race workers).

``tests/`` is on pytest's ``pythonpath``: the project runs pytest with
``--import-mode=importlib``, under which test modules cannot import their siblings, and
``multiprocessing`` children must import the worker functions by module name.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sharesync.state import Checkpoint, StateStore


class FakeClock:
    """The one injected clock of a store under test: moves only when told to."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make_checkpoint(name: str, version: int, **changes: object) -> Checkpoint:
    base = Checkpoint(
        name=name,
        version=version,
        table_id="table-id-1",
        schema_fingerprint="fp-1",
        target=f"/data/{name}",
        mode="merge",
        version_timestamp=datetime(2025, 1, 1, 10, 0, version % 60, tzinfo=UTC),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """Make ``path`` unwritable even for root (CI containers run tests as root)."""
    if os.geteuid() != 0:
        mode = path.stat().st_mode
        path.chmod(0o444 if path.is_file() else 0o555)
        try:
            yield
        finally:
            path.chmod(mode)
        return
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode
    ):
        pytest.skip("running as root without 'chattr +i' permission: nothing makes a file read-only for root here")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def start_run(store: StateStore, name: str, *, start_version: int | None = None, end_version: int | None = None) -> int:
    """A run started as a sync starts one: under the table's lease (taken here by the tests' owner)."""
    lease = store.acquire_lease(name, "tests", timedelta(minutes=5))
    return store.start_run(name, start_version=start_version, end_version=end_version, lease=lease)
