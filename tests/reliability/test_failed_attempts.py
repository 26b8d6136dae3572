"""Every failed attempt is on record: ``status`` shows a failure as the last outcome even when it
happened before the first batch — a config that does not fit the shared table, a failed metadata
call, a lease held by another live process. Nothing is written to the target or the checkpoint.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from datetime import timedelta

import pytest
from support.cli_runner import CliResult
from support.reliability import Site, delta_version

from sharesync.state import this_process

pytestmark = pytest.mark.slow


def _status(cli: Callable[..., CliResult], site: Site) -> dict[str, object]:
    done = cli("--config", str(site.config_file), "status", "--json")
    assert done.code == 0, done.err
    [row] = json.loads(done.out)["tables"]
    assert isinstance(row, dict)
    return row


def _seed_failing_second_call(rate: float) -> int:
    """A seed of the server's fault RNG that lets the first API call pass and fails the second."""
    return next(s for s in range(1000) if (r := random.Random(s)).random() >= rate and r.random() < rate)


def _key_mismatch(site: Site) -> None:
    site.config(site.spec("t", keys=["order_id"]))


def _failing_metadata(site: Site) -> None:
    """``/version`` answers, then ``/metadata`` is refused (403: not retried)."""
    faults = site.server.faults
    faults.error_status, faults.error_rate = 403, 0.5
    faults.seed = _seed_failing_second_call(0.5)


def _held_lease(site: Site) -> None:
    """Another live process on this host holds the table's lease (this one: its pid is alive)."""
    lease = site.store().acquire_lease(site.name("t"), "elsewhere", timedelta(minutes=5), holder=this_process())
    site.on_close(lambda: site.store().release_lease(lease))


CASES: dict[str, tuple[Callable[[Site], None], int, str]] = {
    "key-mismatch": (_key_mismatch, 2, "tables[rel.s.t].keys: ['order_id'] not in the shared table's columns"),
    "metadata-call": (_failing_metadata, 1, "HTTP 403 PERMISSION_DENIED"),
    "held-lease": (_held_lease, 1, "is being synced by elsewhere"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_failure_before_the_first_batch_is_the_last_outcome(
    site: Site, cli: Callable[..., CliResult], case: str
) -> None:
    break_it, code, message = CASES[case]
    site.table("t", rows=10)
    site.config(site.spec("t"))
    assert cli("--config", str(site.config_file), "sync").code == 0
    assert _status(cli, site)["last_status"] == "succeeded"
    site.commit("t", 2, seed=1)  # something to do
    checkpoint, target = site.checkpoint("t"), delta_version(site.target("t"))
    break_it(site)

    result = cli("--config", str(site.config_file), "sync")

    assert result.code == code, result.out + result.err
    assert message in result.err
    site.server.faults.reset()
    row = _status(cli, site)
    assert row["last_status"] == "failed" and message in str(row["last_error"]), row
    assert site.checkpoint("t") == checkpoint and delta_version(site.target("t")) == target
    runs = site.store().runs_for(site.name("t"))
    assert [r.status.value for r in runs] == ["failed", "succeeded"], runs  # newest first
    assert checkpoint is not None and (runs[0].start_version, runs[0].end_version) == (
        checkpoint.version + 1,
        site.version("t"),
    )  # the versions the attempt was after
