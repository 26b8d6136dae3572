"""``kill -9`` of the real ``sharesync sync`` while the provider computes an asynchronous snapshot query.

The server answers the bootstrap's query asynchronously and keeps it pending; once the sync has
polled it, the test kills the process. The submission (idempotency key and queryId) is in the
state store, the checkpoint is not. The next sync polls that same query — the server counts
submissions, and there stays one — and bootstraps the table from its answer.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from support.faults import SharingServer
from support.reliability import Site, kill, poll
from support.verify import assert_merge_target_matches

FAST_POLLS = {"SHARESYNC_ASYNC_POLL_SECONDS": "0.05"}


def _pending(site: Site) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(site.state_db) as db:
        rows = db.execute("SELECT table_name, idempotency_key, query_id FROM sharesync_pending_queries").fetchall()
    return [(str(a), str(b), c) for a, b, c in rows]


def test_sigkill_while_the_provider_computes_resumes_the_same_query(
    tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    (tmp_path / "provider").mkdir()
    site = Site(tmp_path, start_server(tmp_path / "provider"))
    queries = site.server.queries
    try:
        site.table("a", rows=25, seed=5)
        site.config(site.spec("a"))
        queries.after_polls = 1_000_000  # pending until the test lets it finish
        process = site.start_cli("sync", **FAST_POLLS)
        try:
            poll(lambda: process.poll() is not None or queries.polls > 0, timeout=120, what="the first poll")
            assert kill(process), "the sync ended before it could be killed while polling"
        finally:
            kill(process)
        assert queries.submissions == 1
        assert site.checkpoint("a") is None
        ((table, key, query_id),) = _pending(site)
        assert table == site.name("a") and key and query_id

        queries.after_polls = 0  # the provider is done: the next poll gets the files
        resumed = site.run_cli("sync", **FAST_POLLS)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert queries.submissions == 1  # polled the recorded query, submitted nothing new
        checkpoint = site.checkpoint("a")
        assert checkpoint is not None and checkpoint.version == site.version("a")
        assert_merge_target_matches(site.path("a"), site.target("a"), ["id"], checkpoint.version)
        assert _pending(site) == []
    finally:
        site.close()


def test_a_failed_query_fails_the_sync_clearly_and_the_next_one_submits_anew(
    tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    (tmp_path / "provider").mkdir()
    site = Site(tmp_path, start_server(tmp_path / "provider"))
    queries = site.server.queries
    try:
        site.table("a", rows=10, seed=6)
        site.config(site.spec("a"))
        queries.after_polls, queries.outcome = 0, "fail"
        failed = site.run_cli("sync", **FAST_POLLS)
        assert failed.returncode != 0
        assert "the server failed query q-" in failed.stdout + failed.stderr
        assert site.checkpoint("a") is None and _pending(site) == []

        queries.outcome = "succeed"
        again = site.run_cli("sync", **FAST_POLLS)
        assert again.returncode == 0, again.stdout + again.stderr
        assert queries.submissions == 2
        checkpoint = site.checkpoint("a")
        assert checkpoint is not None
        assert_merge_target_matches(site.path("a"), site.target("a"), ["id"], checkpoint.version)
    finally:
        site.close()
