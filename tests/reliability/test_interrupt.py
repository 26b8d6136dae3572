"""Ctrl+C during ``sharesync sync``: one line saying so, exit 130, and the run on record as interrupted.

The real command runs in a child process; the test waits (polling the server's own counter) until
a file download is being held by the server, then sends SIGINT as a terminal's Ctrl+C would.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from support.reliability import Site, kill, poll

pytestmark = pytest.mark.slow


def test_ctrl_c_during_a_bootstrap_says_so_exits_130_and_leaves_an_interrupted_run(site: Site) -> None:
    site.table("t", rows=10)
    site.config(site.spec("t"))
    site.server.faults.download_delay_seconds = 60  # holds each download until the process is gone
    process = site.start_cli("sync")
    try:
        poll(
            lambda: process.poll() is not None or site.server.faults.files_in_flight > 0,
            timeout=60,
            what="a download of the bootstrap",
        )
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        kill(process)
        site.server.faults.download_delay_seconds = 0

    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert process.returncode == 130, (out, err)
    assert lines == [
        "sync interrupted (Ctrl+C); nothing is half-applied: the next sync continues from the checkpoint"
    ], err
    runs = site.store().runs_for(site.name("t"))
    assert [r.status.value for r in runs] == ["failed"], runs
    assert runs[0].error is not None and runs[0].error.startswith("interrupted (Ctrl+C)"), runs[0].error
    assert site.checkpoint("t") is None and site.staged_files() == 0

    status = site.run_cli("status", "--json")
    assert status.returncode == 0, status.stderr
    print(status.stdout)
    assert "interrupted (Ctrl+C)" in status.stdout

    again = site.run_cli("sync")  # and the next sync carries on
    assert again.returncode == 0, again.stdout + again.stderr
    assert site.checkpoint("t") is not None


def test_ctrl_c_before_a_tables_first_batch_is_on_record_too(site: Site) -> None:
    """Interrupted before any batch started a run (here as its sync begins, where the CLI's
    progress display watches it): the attempt is still on record, as an interruption."""
    site.table("t", rows=10)
    config = site.config(site.spec("t"))

    @contextmanager
    def ctrl_c(name: str) -> Iterator[None]:
        raise KeyboardInterrupt  # what Python raises in the main thread on SIGINT
        yield  # pragma: no cover

    with pytest.raises(KeyboardInterrupt):
        site.syncer(config, watch=ctrl_c).sync_all()

    runs = site.store().runs_for(site.name("t"))
    assert [r.status.value for r in runs] == ["failed"], runs
    assert (runs[0].error or "").startswith("interrupted (Ctrl+C)"), runs[0].error
    assert site.checkpoint("t") is None
