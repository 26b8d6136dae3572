"""The read-only SQLite checkpoint reader (``sharesync.state.sqlite``): the store's answer, or none at all.

A pass with nothing new reads its checkpoints through :func:`sharesync.state.sqlite.read_checkpoints`
instead of opening the store. It must return exactly what :meth:`StateStore.list_checkpoints`
returns, and ``None`` — so the caller opens the store, which creates, migrates or refuses —
whenever it cannot be sure.
"""

from __future__ import annotations

import hashlib
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from support.state import make_checkpoint, read_only

from sharesync.state import head_revision, open_store, upgrade
from sharesync.state.database import dispose_databases
from sharesync.state.revisions import VERSION_TABLE
from sharesync.state.sqlite import read_checkpoints, sqlite_file


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/state/state.db"


def _path(url: str) -> Path:
    path = sqlite_file(url)
    assert path is not None
    return path


def _set_revision(url: str, revision: str) -> None:
    dispose_databases()
    with sqlite3.connect(_path(url)) as conn:
        conn.execute(f"UPDATE {VERSION_TABLE} SET version_num = ?", (revision,))
    conn.close()


def test_reads_what_the_store_reads(url: str) -> None:
    store = open_store(url)
    store.advance_checkpoint(make_checkpoint("s.b.z", 7), expected_version=None)
    store.advance_checkpoint(make_checkpoint("s.b.a", 0, version_timestamp=None, mode="append"), expected_version=None)
    east = timezone(timedelta(hours=9))
    store.advance_checkpoint(
        make_checkpoint("s.b.m", 12, version_timestamp=datetime(2025, 3, 1, 9, 30, 0, 123456, tzinfo=east)),
        expected_version=None,
    )

    found = read_checkpoints(url)

    assert found == store.list_checkpoints()
    assert [c.name for c in found] == ["s.b.a", "s.b.m", "s.b.z"]
    assert all(c.updated_at is not None and c.updated_at.tzinfo is UTC for c in found)
    assert found[1].version_timestamp == datetime(2025, 3, 1, 0, 30, 0, 123456, tzinfo=UTC)


def test_reads_the_target_identity_as_the_store_does(url: str) -> None:
    store = open_store(url)
    store.advance_checkpoint(
        make_checkpoint("s.b.known", 4, target_table_id="delta-id", target_version=17, target_mode="history"),
        expected_version=None,
    )
    store.advance_checkpoint(make_checkpoint("s.b.unknown", 2), expected_version=None)

    found = read_checkpoints(url)

    assert found == store.list_checkpoints()
    assert found is not None
    assert [(c.target_table_id, c.target_version, c.target_mode) for c in found] == [
        ("delta-id", 17, "history"),
        (None, None, None),
    ]


def test_a_current_store_without_checkpoints_reads_as_empty(url: str) -> None:
    open_store(url)
    assert read_checkpoints(url) == []


def test_reading_writes_nothing_and_does_not_wait_for_a_writer(url: str) -> None:
    store = open_store(url)
    store.advance_checkpoint(make_checkpoint("s.b.t", 3), expected_version=None)
    dispose_databases()
    path = _path(url)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()

    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # holds the write lock, uncommitted change pending
        writer.execute("UPDATE sharesync_checkpoints SET version = 4")
        found = read_checkpoints(url)
    finally:
        writer.execute("ROLLBACK")
        writer.close()

    assert found is not None and [c.version for c in found] == [3]  # the committed state
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_a_missing_file_is_left_to_the_store_and_not_created(url: str) -> None:
    assert read_checkpoints(url) is None
    assert not _path(url).exists() and not _path(url).parent.exists()


def test_an_empty_file_is_left_to_the_store(url: str) -> None:
    _path(url).parent.mkdir(parents=True)
    _path(url).touch()
    assert read_checkpoints(url) is None


def test_an_older_schema_is_left_to_the_store_which_migrates_it(url: str) -> None:
    assert upgrade(url, "0001") == (None, "0001")
    assert head_revision() != "0001"
    assert read_checkpoints(url) is None

    open_store(url)  # what the caller does next
    assert read_checkpoints(url) == []


def test_a_newer_schema_is_left_to_the_store_which_refuses_it(url: str) -> None:
    open_store(url)
    _set_revision(url, "0099")
    assert read_checkpoints(url) is None


def test_a_store_without_a_version_row_is_left_to_the_store(url: str) -> None:
    open_store(url)
    dispose_databases()
    with sqlite3.connect(_path(url)) as conn:
        conn.execute(f"DELETE FROM {VERSION_TABLE}")
    conn.close()
    assert read_checkpoints(url) is None


def test_a_read_only_file_is_left_to_the_store_which_names_the_fix(url: str) -> None:
    open_store(url)
    dispose_databases()
    with read_only(_path(url)):
        assert read_checkpoints(url) is None


def test_the_head_revision_is_alembics_head() -> None:
    from alembic.script import ScriptDirectory

    from sharesync.state.migrate import _config

    assert ScriptDirectory.from_config(_config()).get_current_head() == head_revision()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///state.db",
        "sqlite:///.sharesync/state.db",
        "sqlite:////var/lib/sharesync/state.db",
        "sqlite+pysqlite:////tmp/a b/state.db",
        "sqlite:////tmp/user@host/state.db",
    ],
)
def test_plain_sqlite_urls_name_the_file_sqlalchemy_would_open(url: str) -> None:
    assert sqlite_file(url) == Path(make_url(url).database or "")


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:pw@db:5432/sharesync",
        "postgresql+psycopg://db/sharesync",
        "mysql:///x.db",
        "sqlite://",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///file::memory:?cache=shared",
        "sqlite:///state.db?timeout=5",
        "sqlite:///sp%20ace.db",
        "not a url",
    ],
)
def test_other_urls_are_left_to_the_store(url: str) -> None:
    assert sqlite_file(url) is None
    assert read_checkpoints(url) is None


def test_checkpoint_columns_are_the_tables_columns() -> None:
    """The one column list (a Checkpoint's fields) names exactly the table's columns: a column
    added to one of them and not the other fails here, not in a no-op pass."""
    from sharesync.state.models import CheckpointRow
    from sharesync.state.records import CHECKPOINT_COLUMNS

    assert sorted(CHECKPOINT_COLUMNS) == sorted(CheckpointRow.__table__.c.keys())
