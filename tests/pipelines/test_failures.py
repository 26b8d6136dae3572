"""What a failure says: one redacted line, whatever the library put in its message."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from sharesync.pipelines.run.batch_run import BatchRunner
from sharesync.pipelines.run.failures import describe
from sharesync.state import open_store
from sharesync.sync.core.errors import LeaseHeld


def test_a_library_error_is_described_by_its_first_line() -> None:
    rust = RuntimeError(
        "Generic DeltaTable error: Invalid JSON in log record, version=3\n\nStack backtrace:\n   0: deltalake::x\n"
    )
    assert describe(rust) == (
        "RuntimeError: Generic DeltaTable error: Invalid JSON in log record, version=3 (more in the log at -v)"
    )
    assert (
        describe(ValueError("https://b/f.parquet?sig=secret-1 went away"))
        == "ValueError: https://b/f.parquet?*** went away"
    )
    assert describe(KeyError()) == "KeyError: "


def test_a_woken_holders_run_closed_as_abandoned_counts_as_recorded_without_a_traceback(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The contender that took the lease over closed the woken holder's run as abandoned: its
    failure is on record, and nothing is logged above info (no stack on the CLI's stderr)."""
    store = open_store(f"sqlite:///{tmp_path}/state.db")
    stale = store.acquire_lease("s.b.t", "holder", timedelta(seconds=60))
    run_id = store.start_run("s.b.t", lease=stale)
    taken = store.acquire_lease("s.b.t", "holder", timedelta(seconds=60))  # as a takeover would
    store.start_run("s.b.t", lease=taken)  # closes the stale run as abandoned
    runner = BatchRunner(SimpleNamespace(store=store), SimpleNamespace(), SimpleNamespace())  # type: ignore[arg-type]

    with caplog.at_level(logging.DEBUG):
        runner._fail_run(run_id, LeaseHeld("lease of s.b.t was lost"))

    assert runner.attempt.recorded
    assert [r for r in caplog.records if r.levelno > logging.INFO or r.exc_info] == []
