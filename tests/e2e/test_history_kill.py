"""``kill -9`` of the real ``sharesync sync`` between a history target's commit and its checkpoint.

The test holds the state database's write lock once the batch downloads (as
``tests/reliability/test_crashes.py`` does), so the sync commits to its target and then waits at
the checkpoint advance; it is killed as soon as the target's log gains that commit. The target
then holds one batch more than its checkpoint says, and the next run applies that batch again:
it must change nothing, and the history must equal the one the provider's change feed gives.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from support.faults import SharingServer
from support.history import assert_history_matches, source_history
from support.reliability import Site, kill, leases_expired, poll, state_write_lock

BATCH = 2  # versions per batch
LEASE_TTL = 2  # seconds


@pytest.mark.parametrize("strategy", ["merge", "rewrite"])
def test_sigkill_between_target_commit_and_checkpoint_repeats_the_batch_without_effect(
    tmp_path: Path, start_server: Callable[..., SharingServer], strategy: str
) -> None:
    (tmp_path / "provider").mkdir()
    site = Site(tmp_path, start_server(tmp_path / "provider"))
    try:
        site.table("k", rows=30, seed=11)
        spec = site.spec("k", "history", keys=["id"], max_versions_per_batch=BATCH, merge_strategy=strategy)
        site.config(spec, lease_ttl_seconds=LEASE_TTL)
        first = site.run_cli("sync")
        assert first.returncode == 0, first.stderr
        for round_ in range(2):
            site.commit("k", 2 * BATCH, seed=20 + round_)
            before = site.checkpoint("k")
            assert before is not None
            _kill_in_commit_gap(site, "k")
            poll(lambda: leases_expired(site.state_db), timeout=4 * LEASE_TTL, what="the killed sync's lease")
            site.server.faults.reset()

            # The checkpoint stayed; the target holds the batch after it.
            after = site.checkpoint("k")
            assert after is not None and after.version == before.version
            applied = before.version + BATCH
            assert_history_matches(
                site.target("k"), source_history(site.path("k"), ["id"], start=0, end=applied), ["id"]
            )

            commits = site.target_commits("k")
            clean = site.run_cli("sync")
            assert clean.returncode == 0, clean.stdout + clean.stderr
            # Nothing applied twice: the sync resumes from what the target holds (issue 40 §2). A
            # rewrite's commit records its batch, so one commit for the one batch still to apply; a
            # MERGE commit carries no record, so it resumes at its rows' newest version - 1 and the
            # three versions left take two batches.
            assert site.target_commits("k") == commits + (1 if strategy == "rewrite" else 2)
            assert "resum" in clean.stdout + clean.stderr
            latest = site.version("k")
            assert_history_matches(
                site.target("k"), source_history(site.path("k"), ["id"], start=0, end=latest), ["id"]
            )
    finally:
        site.close()


def _kill_in_commit_gap(site: Site, table: str) -> None:
    """Start ``sharesync sync`` and SIGKILL it after its target commit, before its checkpoint write."""
    site.server.faults.download_delay_seconds = 0.15  # a download phase a poll can catch
    process = site.start_cli("sync")
    try:
        poll(lambda: process.poll() is not None or site.downloading(table), timeout=120, what="downloads")
        with state_write_lock(site.state_db):
            commits = site.target_commits(table)
            poll(
                lambda: process.poll() is not None or site.target_commits(table) > commits,
                timeout=60,
                what="the target commit",
            )
            assert kill(process), "the sync ended before it could be killed in the commit gap"
    finally:
        kill(process)
