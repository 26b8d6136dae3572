"""Migrations: from empty, from the first revision, refusing newer schemas, models == migrations."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from support.state import start_run

from sharesync.state import current_revision, head_revision, open_store, upgrade
from sharesync.state.database import dispose_databases
from sharesync.state.models import Base
from sharesync.state.revisions import VERSION_TABLE
from sharesync.sync.core.errors import LeaseHeld, StateSchemaTooNew

REPO = Path(__file__).resolve().parents[2]


def _engine(url: str) -> Any:
    parsed = make_url(url)
    if parsed.drivername.startswith("postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    elif parsed.database:
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    return create_engine(parsed)


def _dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table: the "nothing was written" witness."""
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            tables = sorted(inspect(conn).get_table_names())
            return {t: sorted(map(tuple, conn.execute(text(f'SELECT * FROM "{t}"')).all()), key=repr) for t in tables}
    finally:
        engine.dispose()


def test_empty_database_is_migrated_to_head_on_open(store_url: str) -> None:
    assert current_revision(store_url) is None
    open_store(store_url)
    assert current_revision(store_url) == head_revision() == "0005"
    tables = set(_dump(store_url))
    assert {"sharesync_checkpoints", "sharesync_runs", "sharesync_leases", VERSION_TABLE} <= tables


def test_upgrade_from_the_first_revision_keeps_the_data(store_url: str) -> None:
    assert upgrade(store_url, "0001") == (None, "0001")
    engine = _engine(store_url)
    with engine.begin() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("sharesync_runs")}
        assert "error" not in columns and "url_refreshes" not in columns
        conn.execute(
            text(
                "INSERT INTO sharesync_runs (table_name, start_version, end_version, status, rows_inserted, "
                "started_at, finished_at) VALUES ('s.b.t', 1, 4, 'succeeded', 7, :t, :t)"
            ),
            {"t": "2025-01-01 00:00:00"},
        )
        conn.execute(
            text(
                "INSERT INTO sharesync_checkpoints (name, version, table_id, schema_fingerprint, target, mode, "
                "updated_at) VALUES ('s.b.t', 4, 'id-1', 'fp', '/data/t', 'merge', :t)"
            ),
            {"t": "2025-01-01 00:00:00"},
        )
    engine.dispose()

    store = open_store(store_url)
    assert current_revision(store_url) == "0005"
    (run,) = store.runs_for("s.b.t")
    assert (run.stats.rows_inserted, run.stats.url_refreshes, run.error, run.note) == (7, 0, None, None)
    checkpoint = store.get_checkpoint("s.b.t")
    assert checkpoint is not None and checkpoint.version == 4
    assert checkpoint.updated_at is not None and checkpoint.updated_at.tzinfo is not None
    assert upgrade(store_url) == ("0005", "0005")  # idempotent


def test_upgrade_from_0003_keeps_the_rows_and_leaves_the_new_facts_unknown(store_url: str) -> None:
    assert upgrade(store_url, "0003") == (None, "0003")
    engine = _engine(store_url)
    with engine.begin() as conn:
        t = {"t": "2025-01-01 00:00:00", "later": "2999-01-01 00:00:00"}
        conn.execute(
            text(
                "INSERT INTO sharesync_checkpoints (name, version, version_timestamp, table_id, schema_fingerprint, "
                "target, mode, updated_at) VALUES ('s.b.t', 4, :t, 'id-1', 'fp', '/data/t', 'append', :t)"
            ),
            t,
        )
        conn.execute(
            text(
                "INSERT INTO sharesync_leases (name, owner, token, acquired_at, renewed_at, expires_at) "
                "VALUES ('s.b.t', 'old-host:12:ab', 'tok', :t, :t, :later)"
            ),
            t,
        )
        conn.execute(
            text(
                "INSERT INTO sharesync_runs (table_name, start_version, end_version, status, started_at, note) "
                "VALUES ('s.b.t', 5, 6, 'running', :t, 'n')"
            ),
            t,
        )
    engine.dispose()

    store = open_store(store_url)
    assert current_revision(store_url) == head_revision()
    checkpoint = store.get_checkpoint("s.b.t")
    assert checkpoint is not None
    assert (checkpoint.version, checkpoint.table_id, checkpoint.mode, checkpoint.target) == (
        4,
        "id-1",
        "append",
        "/data/t",
    )
    assert (checkpoint.target_table_id, checkpoint.target_version, checkpoint.target_mode) == (None, None, None)
    lease = store.get_lease("s.b.t")
    assert lease is not None and (lease.owner, lease.token, lease.holder) == ("old-host:12:ab", "tok", None)
    # A lease without a recorded holder cannot be judged from here: it waits for its expiry.
    with pytest.raises(LeaseHeld, match="old-host:12:ab"):
        store.acquire_lease("s.b.t", "new-owner", timedelta(seconds=30))
    (run,) = store.runs_for("s.b.t")
    assert (run.status.value, run.start_version, run.end_version, run.note) == ("running", 5, 6, "n")


def test_schema_from_a_newer_sharesync_is_refused_without_writes(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    start_run(store, "s.b.t")
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0042_from_the_future'"))
    engine.dispose()
    dispose_databases()
    before = _dump(store_url)
    sqlite_file = Path(make_url(store_url).database or "") if store_url.startswith("sqlite") else None
    digest = hashlib.sha256(sqlite_file.read_bytes()).hexdigest() if sqlite_file else None

    for attempt in (lambda: open_store(store_url), lambda: current_revision(store_url), lambda: upgrade(store_url)):
        with pytest.raises(StateSchemaTooNew, match="'0042_from_the_future'.*newer sharesync.*nothing was written"):
            attempt()

    dispose_databases()
    assert _dump(store_url) == before
    if sqlite_file is not None:
        assert hashlib.sha256(sqlite_file.read_bytes()).hexdigest() == digest


def test_another_applications_alembic_version_is_not_ours(store_url: str) -> None:
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('abc123')"))
    engine.dispose()
    open_store(store_url)
    assert current_revision(store_url) == head_revision()


def test_models_match_the_migrations(store_url: str) -> None:
    open_store(store_url)
    engine = _engine(store_url)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True, "version_table": VERSION_TABLE})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_revision_files_follow_the_naming_that_open_relies_on() -> None:
    """open_store reads the shipped revisions from file names (no Alembic import); Alembic must agree."""
    from alembic.script import ScriptDirectory

    from sharesync.state.migrate import _config
    from sharesync.state.revisions import VERSIONS_DIR, known_revisions

    scripts = ScriptDirectory.from_config(_config())
    assert known_revisions() == {script.revision for script in scripts.walk_revisions()}
    assert scripts.get_heads() == [head_revision()]  # one linear history, newest = highest number
    for script in scripts.walk_revisions():
        assert Path(script.path).name.startswith(f"{script.revision}_")
        assert Path(script.path).parent == VERSIONS_DIR


def test_migrations_run_from_an_installed_package(tmp_path: Path) -> None:
    """The migration scripts ship as package data: build the package and migrate with it alone."""
    pytest.importorskip("setuptools")
    source = tmp_path / "src"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    for package in ("state", "sync", "pipelines"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    (source / "README.md").write_text("x")
    built = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "-d", str(built)],
        cwd=source,
        check=True,
        capture_output=True,
    )
    shutil.rmtree(source)  # nothing may be read from the source tree
    db = tmp_path / "state.db"
    script = (
        "import sys; import sharesync.state as state; assert state.__file__.startswith(sys.argv[1]), state.__file__; "
        "state.open_store('sqlite:///' + sys.argv[2]); print(state.current_revision('sqlite:///' + sys.argv[2]))"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, sys.argv[1]); {script}", str(built), str(db)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,  # the assertion below shows stderr
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == head_revision()
