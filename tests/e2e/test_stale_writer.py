"""A stale writer — a holder that lost its lease with a write still to make — is fenced by the target.

Holder A of each table stages its batch (provider version 1) and stops just before its jobs write,
as a process frozen there would. The provider then deletes a row (version 2); holder B, whose
state database clock reads an hour later (A's lease expired by it), takes the leases over and
syncs both tables to version 2. A then goes on: on Apache Spark + Delta, Delta skips A's DELETE,
append and MERGE (the targets' ``txn`` record for the table is above A's numbers), so the targets
stay what B wrote — no duplicate change rows, no resurrected row — and A's run fails with the lost
lease. Sail ignores the options (second test): there the lease's refused checkpoint advance stays
the only fence, as docs/guarantees.md says.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from deltalake import DeltaTable
from support.e2e import Workspace
from support.engines import SPARK
from support.verify import assert_append_target_matches, assert_merge_target_matches

from sharesync.pipelines.modes.append import append
from sharesync.pipelines.modes.merge import merge
from sharesync.pipelines.run.results import TableOutcome
from sharesync.state import open_store

WAIT = 300.0  # a bound on each wait, never reached unless the test is broken


@pytest.mark.slow
@pytest.mark.parametrize("engine", [SPARK], indirect=True)
def test_a_stale_writer_is_skipped_by_delta_on_spark(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = workspace
    ws.table("a", rows=20, seed=1)
    ws.table("m", rows=40, seed=2)
    config = ws.config(ws.spec("a", "append"), ws.spec("m"))
    assert all(r.outcome is TableOutcome.SYNCED for r in ws.syncer(config).sync_all(parallel=2))
    for table in ("a", "m"):
        DeltaTable(ws.path(table)).update({"name": "'v1'"}, predicate="id = 7")  # version 1, by deltalake

    arrived, resume, b_phase = threading.Barrier(3), threading.Event(), threading.Event()

    def paused(job: Callable[..., Any]) -> Callable[..., Any]:
        def held(*args: Any, **kwargs: Any) -> Any:
            if not b_phase.is_set():  # holder A's table threads: stop before the first write
                arrived.wait(WAIT)
                assert resume.wait(WAIT)
            return job(*args, **kwargs)

        return held

    # The strategies import their jobs when they apply a batch, so the jobs' own modules are patched.
    monkeypatch.setattr(append, "apply_append", paused(append.apply_append))
    monkeypatch.setattr(merge, "apply_merge", paused(merge.apply_merge))
    stale = ws.syncer(config)
    outcome: list[Any] = []
    holder_a = threading.Thread(target=lambda: outcome.extend(stale.sync_all(parallel=2)), name="holder-a")
    holder_a.start()
    arrived.wait(WAIT)  # both of A's tables hold their lease, batch staged, jobs about to write
    b_phase.set()
    for table in ("a", "m"):
        DeltaTable(ws.path(table)).delete("id = 7")  # version 2
    later = open_store(config.state_store, clock=lambda: datetime.now(UTC) + timedelta(hours=1))
    assert all(r.outcome is TableOutcome.SYNCED for r in ws.syncer(config, store=later).sync_all(parallel=2))
    resume.set()
    holder_a.join(WAIT)

    for result in outcome:
        assert result.outcome is TableOutcome.FAILED
        assert result.error is not None and "was lost" in result.error, result.error
    assert_append_target_matches(ws.path("a"), ws.target("a"), bootstrap_version=0, end_version=2)
    assert_merge_target_matches(ws.path("m"), ws.target("m"), ["id"], 2)  # row 7 stays deleted
    assert {c.version for c in later.list_checkpoints()} == {2}


def test_sail_ignores_the_fencing_options(tmp_path: Any) -> None:
    """What docs/guarantees.md says of Sail: a write whose ``txnVersion`` is below the recorded one lands."""
    from support.spark import get_spark

    spark, path = get_spark(), str(tmp_path / "t")
    spark.range(3).write.format("delta").option("txnAppId", "x").option("txnVersion", "10").save(path)
    spark.range(3, 5).write.format("delta").mode("append").option("txnAppId", "x").option("txnVersion", "5").save(path)
    table = DeltaTable(path)
    assert table.version() == 1 and table.transaction_version("x") is None  # written, and no txn recorded
