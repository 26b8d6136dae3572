"""Losing the state store: the targets say how far they got, and syncing resumes from there.

A merge, an append and a history table are synced twice; then the state store is lost — the SQLite file
deleted, or a PostgreSQL store restored from a dump
taken after the first pass and put right by ``sharesync db recover`` — the provider commits
more, and the next pass resumes from what each target's own Delta log records: the provider's snapshot endpoint (``/query``) is not
called, the append target keeps its change log with each row once (before, it was replaced by
the snapshot), the history target its history, and every target equals the source. On both engines.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import engine_cases
from support.history import assert_history_matches, source_history
from support.pg_server import Unavailable, bindir_or_unavailable, postgres_database
from support.verify import assert_append_target_matches, assert_merge_target_matches, source_version

from sharesync.pipelines.run.results import TableOutcome
from sharesync.state import open_store
from sharesync.state.database import dispose_databases

FIRST = 2  # the provider's version at the first sync (the append log's and the history's bootstrap)
TABLES = "mah"


@pytest.fixture
def pg_url() -> Iterator[str]:
    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_database())
        except Unavailable as error:
            pytest.skip(f"no PostgreSQL server: {error}")
        yield url


def _records(target: str) -> list[dict[str, object]]:
    """The sharesync records in the target's Delta log, oldest first (read as plain JSON)."""
    found = []
    for commit in sorted(Path(target, "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo") or {}
            if "sharesync" in str(info.get("userMetadata", "")):
                found.append(json.loads(info["userMetadata"])["sharesync"])
    return found


# The store is the client's, not the engine's: Spark recovers from its targets with PostgreSQL.
@engine_cases(["store"], {"sqlite": ("sqlite",), "postgres": ("postgres",)}, on_spark=["postgres"])
def test_a_lost_or_older_state_store_resumes_from_the_targets(
    workspace: Workspace, cli: Callable[..., CliResult], store: str, request: pytest.FixtureRequest
) -> None:
    ws = workspace
    for seed, table in enumerate(TABLES):
        ws.table(table, rows=30, seed=seed)
        ws.commit(table, FIRST, seed=10 + seed)
    url = request.getfixturevalue("pg_url") if store == "postgres" else None
    specs = ws.spec("m"), ws.spec("a", "append"), ws.spec("h", "history", keys=["id"])
    config = ws.config(*specs, **({"state_store": url} if url else {}))
    assert all(r.outcome is TableOutcome.SYNCED for r in ws.syncer(config).sync_all())
    dump = ws.root / "state.dump"
    if url is not None:  # the backup, taken after the first pass
        bindir = bindir_or_unavailable()
        subprocess.run([str(bindir / "pg_dump"), "-Fc", "-f", str(dump), "-d", _libpq(url)], check=True)
    for offset, table in enumerate(TABLES):
        ws.commit(table, 2, seed=20 + offset)
    assert all(r.outcome is TableOutcome.SYNCED for r in ws.syncer(config).sync_all())
    # Each batch recorded its provider table and versions in the target's own log.
    append_records = _records(ws.target("a"))
    assert [(r["from"], r["to"]) for r in append_records] == [(FIRST, FIRST), (FIRST + 1, FIRST + 2)]
    assert append_records[0]["table"] == ws.name("a") and append_records[0]["mode"] == "append"

    dispose_databases()
    if url is None:  # the SQLite file is deleted: the next pass rebuilds each checkpoint by itself
        for path in (ws.root / "state").glob("state.db*"):
            path.unlink()
    else:  # the PostgreSQL store goes back to its backup (one pass behind), then 'db recover'
        bindir = bindir_or_unavailable()
        subprocess.run([str(bindir / "pg_restore"), "--clean", "-d", _libpq(url), str(dump)], check=True)
        assert open_store(url).get_checkpoint(ws.name("a")).version == FIRST  # type: ignore[union-attr]
        recovered = cli("--config", str(ws.config_file), "db", "recover", "--from-targets")
        assert recovered.code == 0, recovered.err
        assert f"{ws.name('a')}: checkpoint at version {FIRST + 2} (was {FIRST})" in recovered.out
    for offset, table in enumerate(TABLES):
        ws.commit(table, 2, seed=30 + offset)

    client, transport = ws.counting_client(config)
    results = ws.syncer(config, client=client).sync_all()
    assert all(r.outcome is TableOutcome.SYNCED and r.error is None for r in results)
    assert "query" not in transport.endpoints  # no snapshot downloaded again
    if url is None:  # said once, by the pass that resumed
        said = "the state store had no checkpoint; target"
        assert all(any(said in w and "resumes from there" in w for w in r.warnings) for r in results)
        store = open_store(config.state_store)  # the run record too, which 'status' shows
        notes = [run.note or "" for name in map(ws.name, TABLES) for run in store.runs_for(name)]
        assert sum(said in note for note in notes) == len(TABLES)
    end = source_version(ws.path("a"))
    assert_append_target_matches(ws.path("a"), ws.target("a"), bootstrap_version=FIRST, end_version=end)
    assert_merge_target_matches(ws.path("m"), ws.target("m"), ["id"], source_version(ws.path("m")))
    history = source_history(ws.path("h"), ["id"], start=FIRST, end=source_version(ws.path("h")))
    assert_history_matches(ws.target("h"), history, ["id"])
    again = ws.syncer(config).sync_all()
    assert all(r.outcome is TableOutcome.UP_TO_DATE and not r.warnings for r in again)


def _libpq(url: str) -> str:
    """The SQLAlchemy URL as libpq's tools take it."""
    return url.replace("postgresql+psycopg://", "postgresql://")
