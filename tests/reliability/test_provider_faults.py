"""A provider having a bad day: every fault either heals within the pass or fails the table cleanly.

Each test syncs several rounds of random provider commits into a merge, an append and a
snapshot table while the local sharing server misbehaves, and after each round checks the
rule: the stored checkpoint is the source's version and the target equals the source there
(nothing lost, nothing twice). Faults that cannot heal (an ``errorMessage`` in the stream, a
file that keeps arriving with the wrong length) must fail the table with a message that says
what happened, leave the checkpoint and the target untouched, and the next pass converges.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import threading
from typing import Any

import httpx
import pytest
from deltalake import DeltaTable
from support.reliability import Expectation, Site, assert_at_checkpoint, delta_version, poll

from sharesync.pipelines.run.results import TableOutcome, TableSyncResult
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.retry import RetryPolicy
from sharesync.sync.protocol.transport import build_http_client

pytestmark = pytest.mark.slow

MODES = {"m": "merge", "a": "append", "s": "snapshot"}


def _three_tables(site: Site, tables: str = "mas", **spec: Any) -> tuple[Any, dict[str, Expectation]]:
    """Tables ``m`` (merge), ``a`` (append), ``s`` (snapshot), or those of them named in ``tables``."""
    modes = {t: m for t, m in MODES.items() if t in tables}
    for seed, table in enumerate(modes):
        site.table(table, rows=40, seed=seed)
    config = site.config(*(site.spec(t, mode, **spec) for t, mode in modes.items()))
    expectations = {t: Expectation(t, mode) for t, mode in modes.items()}
    return config, expectations


def _commit_all(site: Site, round_: int, n: int = 3, tables: str = "mas") -> None:
    for offset, table in enumerate(tables):
        site.commit(table, n, seed=1000 * round_ + offset)


def _check_round(site: Site, results: list[TableSyncResult], expectations: dict[str, Expectation]) -> None:
    by_name = {r.name: r for r in results}
    for table, expect in expectations.items():
        result = by_name[site.name(table)]
        assert result.outcome is not TableOutcome.FAILED, f"{table}: {result.error}"
        if expect.mode == "append" and expect.bootstrap is None:
            expect.bootstrap = result.checkpoint_version
        assert_at_checkpoint(site, expect)


def _targets(site: Site) -> dict[str, int | None]:
    """The Delta version of each target (None: not created)."""
    return {t: delta_version(site.target(t)) for t in MODES}


def _checkpoints(site: Site) -> dict[str, int | None]:
    return {t: (c.version if (c := site.checkpoint(t)) else None) for t in MODES}


class RecordingTransport(httpx.BaseTransport):
    """Forwards to a real transport and records each request's table, endpoint, parameters and body."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        table, _, endpoint = request.url.path.rpartition("/")
        self.requests.append((table.rsplit("/", 1)[-1], endpoint, dict(request.url.params), request.read()))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _client(site: Site, *, retry: RetryPolicy | None = None) -> tuple[SharingClient, RecordingTransport]:
    """A client for the site's server whose requests are recorded."""
    transport = RecordingTransport()
    assert site.server.profile_path is not None
    http = build_http_client(transport=transport)
    site.on_close(http.close)
    return SharingClient(load_profile(site.server.profile_path), http=http, retry=retry), transport


# ---------------------------------------------------------------- transient faults: healed within the pass


def test_a_fifth_of_api_calls_failing_with_5xx_or_429_heals_within_each_pass(
    site: Site, caplog: pytest.LogCaptureFixture
) -> None:
    config, expectations = _three_tables(site, max_versions_per_batch=2)
    syncer = site.syncer(config)
    faults = site.server.faults
    faults.error_rate, faults.seed = 0.2, 6
    plan = [(503, None), (429, 1.0), (500, None), (429, 0.0)]  # status, Retry-After seconds

    for round_, (status, retry_after) in enumerate(plan):
        if round_:
            _commit_all(site, round_)
        faults.error_status, faults.retry_after = status, retry_after
        before = faults.faulted
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="sharesync.sync.protocol.retry"):
            results = syncer.sync_all()
        assert faults.faulted > before, f"round {round_}: no call was faulted, the test proves nothing"
        _check_round(site, results, expectations)
        waits = [float(m) for m in re.findall(r"attempt \d+ of \d+ in ([0-9.]+)s", caplog.text)]
        assert waits, f"round {round_}: the retries were not logged"
        if retry_after is not None:
            # The server said when: every retry of this round waited exactly that long (never less).
            assert set(waits) == {retry_after}, waits


def test_broken_streams_are_fetched_again_and_nothing_is_applied_twice(site: Site) -> None:
    config, expectations = _three_tables(site, max_versions_per_batch=2)
    # The backoff schedule is not under test here (tests/sync/client): keep the waits short.
    syncer = site.syncer(config, client=_client(site, retry=RetryPolicy(initial_backoff=0.01, max_backoff=0.05))[0])
    faults = site.server.faults
    # A connection dropped after the first line; a stream without its endStreamAction; a last line cut.
    plan = ["drop_connection", "drop_end_stream_action", "truncate_stream", "drop_connection"]

    for round_, fault in enumerate(plan):
        if round_:
            _commit_all(site, round_)
        faults.reset()
        setattr(faults, fault, True)
        faults.budget = 6  # the first six NDJSON answers of the round break; their retries do not
        _check_round(site, syncer.sync_all(), expectations)
        assert faults.budget == 0, f"round {round_}: only {6 - faults.budget} streams were broken by {fault}"


def test_an_error_message_in_end_stream_action_fails_the_tables_cleanly_then_the_next_pass_converges(
    site: Site,
) -> None:
    config, expectations = _three_tables(site)
    syncer = site.syncer(config)
    faults = site.server.faults

    for round_ in range(3):
        if round_:
            _commit_all(site, round_)
        targets, checkpoints = _targets(site), _checkpoints(site)
        faults.end_stream_error = "java.lang.OutOfMemoryError: provider-side failure"
        failed = syncer.sync_all()
        for result in failed:
            assert result.outcome is TableOutcome.FAILED
            assert result.error is not None
            assert (
                "the server failed while streaming: java.lang.OutOfMemoryError: provider-side failure" in result.error
            )
        assert _targets(site) == targets and _checkpoints(site) == checkpoints, "a failed pass wrote something"
        faults.end_stream_error = None
        _check_round(site, syncer.sync_all(), expectations)


# ---------------------------------------------------------------- presigned URLs that expire during the downloads


def test_urls_living_one_second_are_renewed_for_bootstraps_and_change_batches(site: Site) -> None:
    # One download at a time, each stalled 0.3 s: a batch of 4+ files outlives its URLs. The merge
    # table bootstraps, then applies change batches; the snapshot table bootstraps every round.
    config, expectations = _three_tables(site, "ms", download_concurrency=1)
    client, transport = _client(site)
    syncer = site.syncer(config, client=client)
    faults = site.server.faults
    faults.url_ttl_seconds, faults.download_delay_seconds = 1.0, 0.3

    for round_ in range(2):  # 0: bootstraps (refreshToken); 1: a change batch (re-query) and a bootstrap
        if round_:
            site.commit("m", 4, seed=round_)  # 4 versions, each with at least one file
            site.append("s", 2, seed=round_, rows=1)  # appends only: the snapshot keeps its 4+ files
        transport.requests.clear()
        results = {r.name: r for r in syncer.sync_all()}
        _check_round(site, list(results.values()), expectations)
        for table in ("m", "s"):
            batches = results[site.name(table)].batches
            assert sum(b.stats.url_refreshes for b in batches) > 0, f"round {round_} {table}: no URL was renewed"
        queries = [(t, json.loads(body or b"{}")) for t, endpoint, _, body in transport.requests if endpoint == "query"]
        changes = [
            (t, p.get("startingVersion"), p.get("endingVersion"))
            for t, endpoint, p, _ in transport.requests
            if endpoint == "changes"
        ]
        # Bootstraps of the latest snapshot renew by refreshToken (spec: the same files, new URLs).
        renewed_by_token = {t for t, body in queries if body.get("refreshToken")}
        assert renewed_by_token == ({"m", "s"} if round_ == 0 else {"s"}), queries
        if round_:
            # Change batches renew by asking for the same range again and matching file ids.
            assert [b.kind for b in results[site.name("m")].batches] == ["changes"]
            assert len(changes) >= 2 and len(set(changes)) == 1, f"round {round_}: {changes}"


# ---------------------------------------------------------------- wrong file lengths


def test_files_of_the_wrong_length_are_downloaded_again(site: Site) -> None:
    config, expectations = _three_tables(site)
    syncer = site.syncer(config)
    faults = site.server.faults

    for round_, delta in enumerate((+7, -7, +1)):
        if round_:
            _commit_all(site, round_)
        faults.file_size_delta = delta
        faults.budget = 3  # three downloads of the round arrive too long / too short, then they are right
        _check_round(site, syncer.sync_all(), expectations)
        assert faults.budget == 0


def test_a_file_that_keeps_its_wrong_length_fails_the_table_and_writes_nothing(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "2")
    config, expectations = _three_tables(site)
    syncer = site.syncer(config)
    faults = site.server.faults

    for round_, delta in enumerate((-5, +5_000_000)):
        if round_:
            _commit_all(site, round_)
        targets, checkpoints = _targets(site), _checkpoints(site)
        faults.file_size_delta = delta
        for result in syncer.sync_all():
            assert result.outcome is TableOutcome.FAILED
            assert result.error is not None
            wording = "the server declared" if delta < 0 else "longer than the declared size; stopped"
            assert wording in result.error, result.error
        assert _targets(site) == targets and _checkpoints(site) == checkpoints, "a failed pass wrote something"
        assert site.staged_files() == 0, "a failed download left files in the staging directory"
        faults.file_size_delta = 0
        _check_round(site, syncer.sync_all(), expectations)


# ---------------------------------------------------------------- the server restarts in the middle of a sync


def test_a_server_restart_in_the_middle_of_a_sync_is_survived(site: Site) -> None:
    config, expectations = _three_tables(site, download_concurrency=2)
    syncer = site.syncer(config)
    server = site.server
    server.faults.download_delay_seconds = 0.2  # keeps downloads in flight long enough to restart under them

    for round_ in range(3):
        if round_:
            _commit_all(site, round_, n=4)
        outcome: list[list[TableSyncResult]] = []
        worker = threading.Thread(target=lambda out=outcome: out.append(syncer.sync_all()), name=f"sync-{round_}")
        worker.start()
        try:
            poll(lambda: site.staged_files() > 0, timeout=60, what="the sync to start downloading")
            server.restart()
        finally:
            worker.join(timeout=180)
        assert not worker.is_alive(), "the sync hung after the restart"
        _check_round(site, outcome[0], expectations)


# ---------------------------------------------------------------- the provider re-creates a table, or loses history


def _recreate(site: Site, table: str, seed: int) -> None:
    """Drop the provider table and create a new one under the same name: new table id, versions restart."""
    shutil.rmtree(site.path(table))
    site.table(table, rows=15, seed=seed)


def _lose_history(site: Site, table: str, seed: int) -> None:
    """An append, then an update rewriting every file, then VACUUM: the append's changes are gone."""
    site.append(table, 1, seed=seed, rows=2)
    path = str(site.path(table))
    DeltaTable(path).update(updates={"tiny": "coalesce(tiny, 0) / 2"})
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)


def test_a_recreated_table_and_vacuumed_history_are_rebootstrapped_and_syncing_goes_on(site: Site) -> None:
    config, expectations = _three_tables(site, max_versions_per_batch=2)
    syncer = site.syncer(config)
    append = expectations["a"]
    plan = ["commits", "recreate", "commits", "lose-history", "commits"]

    _check_round(site, syncer.sync_all(), expectations)
    for round_, event in enumerate(plan, start=1):
        before = {t: site.checkpoint(t) for t in MODES}
        if event == "recreate":
            for offset, table in enumerate(MODES):
                _recreate(site, table, seed=70 + offset)
            _commit_all(site, round_, n=2)  # version 2: below every checkpoint, under a new table id
            # The append log is kept (issue 40): continued once the new table's versions pass it.
            if (old := before["a"]) is not None:
                site.commit("a", old.version, seed=90)
        elif event == "lose-history":
            _commit_all(site, round_, n=2)
            for offset, table in enumerate(MODES):
                _lose_history(site, table, seed=80 + offset)
        else:
            _commit_all(site, round_)
        results = {r.name: r for r in syncer.sync_all()}

        if event in ("recreate", "lose-history"):
            for table in MODES:
                result = results[site.name(table)]
                assert result.outcome is TableOutcome.SYNCED, result.error
                # Change batches still served are applied first; then the snapshot takes over.
                assert result.batches[-1].kind == "bootstrap", (table, result.batches)
                if table != "s":  # snapshot tables bootstrap every time anyway, silently
                    assert result.warnings, f"{table}: a re-bootstrap after '{event}' deserves a warning"
            # The append log continues after a re-created source and after a gap (from the
            # checkpoint the bootstrap found).
            append.bootstrap = site.version("a")
            append.above = before["a"].version if before["a"] else None
            if event == "lose-history":
                batches = results[site.name("a")].batches
                old = before["a"]
                append.above = batches[-2].end_version if len(batches) > 1 else (old.version if old else None)
        _check_round(site, list(results.values()), expectations)
        ids = {t: c.table_id for t in MODES if (c := site.checkpoint(t)) is not None}
        if event == "recreate":
            assert all(ids[t] != before[t].table_id for t in MODES if before[t] is not None)
