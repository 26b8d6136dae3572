"""Opening a store: URL validation, SQLite setup, and failures that name the fix, never the password."""

from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from support.state import make_checkpoint, read_only

from sharesync.state import open_store
from sharesync.state.database import parse_url
from sharesync.state.sqlite import SQLITE_BUSY_TIMEOUT_MS
from sharesync.sync.core.errors import ConfigError, StateStoreUnavailable
from sharesync.sync.core.redact import redact

UNREACHABLE = "postgresql://u:secretpw@127.0.0.1:1/db"


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("mysql://u:secretpw@db/x", "unsupported database 'mysql'"),
        ("oracle+cx_oracle://db/x", "unsupported database 'oracle"),
        ("postgresql+asyncpg://db/x", "unsupported database 'postgresql\\+asyncpg'"),
        ("not a url", "is not a database URL"),
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
    ],
)
def test_bad_urls_are_config_errors_with_the_fix(url: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        open_store(url)
    assert "secretpw" not in str(caught.value)
    assert "sqlite:///" in str(caught.value) or "in-memory" in str(caught.value)


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
def test_postgres_urls_use_psycopg_3(scheme: str) -> None:
    assert parse_url(f"{scheme}://u@h:5433/db").drivername == "postgresql+psycopg"


def test_unreachable_postgres_names_host_and_port_not_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StateStoreUnavailable) as caught:
        open_store(UNREACHABLE)
    message = str(caught.value)
    assert "host 127.0.0.1 port 1" in message and "\n" not in message
    assert "secretpw" not in message and "secretpw" not in caplog.text
    assert "secretpw" not in redact(f"later text mentioning {UNREACHABLE} or the bare secretpw")


def test_sqlite_creates_its_directory_and_uses_wal_with_a_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "state.db"
    store = open_store(f"sqlite:///{path}")
    assert path.exists()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with store._db.read("test") as conn:  # the store's own connections
        assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == SQLITE_BUSY_TIMEOUT_MS
        assert conn.execute(text("PRAGMA synchronous")).scalar_one() == 2  # FULL


def test_a_write_lock_held_past_the_busy_timeout_says_how_long_it_waited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sharesync.state.database.SQLITE_BUSY_TIMEOUT_MS", 300)
    path = tmp_path / "state.db"
    store = open_store(f"sqlite:///{path}")  # a new file, so a new engine with the short timeout
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's long write transaction
        with pytest.raises(StateStoreUnavailable) as raised:
            store.advance_checkpoint(make_checkpoint("t", 1), expected_version=None)
    finally:
        other.close()
    message = str(raised.value)
    matched = re.fullmatch(
        rf"state database '{re.escape(str(path))}' was locked while .*checkpoint.* \(gave up after "
        r"(\d+\.\d) s; the busy timeout is 0\.3 s\); another process holds a long write transaction\. "
        "For many parallel writers use PostgreSQL",
        message,
    )
    assert matched is not None, message
    assert float(matched.group(1)) >= 0.3  # the time it waited, not a fixed figure
    assert store.get_checkpoint("t") is None


def test_read_only_sqlite_file_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    url = f"sqlite:///{path}"
    open_store(url)
    from sharesync.state.database import dispose_databases

    dispose_databases()
    with read_only(path), pytest.raises(StateStoreUnavailable, match="is read-only.*make it writable"):
        open_store(url)


def test_unwritable_directory_is_refused_with_the_fix(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    with read_only(locked), pytest.raises(StateStoreUnavailable, match="cannot create directory|read-only"):
        open_store(f"sqlite:///{locked}/sub/state.db")
