"""A read-only look at a SQLite state store's checkpoints, with the standard library alone.

A sync pass starts by asking which tables have anything new: each checkpoint against the
provider's version. When nothing is new that is the whole pass, so for a SQLite store
:func:`read_checkpoints` answers it without importing SQLAlchemy, Alembic or the ORM models,
which would otherwise be most of a no-op process's time. Everything that writes — leases,
runs, checkpoint advances — and every read after the pre-check stays in
:class:`sharesync.state.store.StateStore`.

:func:`read_checkpoints` answers only when its answer is the store's answer, and otherwise
returns ``None``; the caller then opens the store with :func:`sharesync.state.store.open_store`, which
creates, migrates or refuses the database with the full error messages. ``None`` when:

* the URL is not a plain ``sqlite:///path`` (PostgreSQL; query parameters, percent-escapes or
  in-memory databases, which only SQLAlchemy's URL parser reads right);
* the file does not exist yet, or it or its directory is not writable (a pass must not look
  fine while the next real sync fails; ``open_store`` says what to fix);
* the stored schema revision is not this sharesync's head (older: to be migrated; newer: to
  be refused), the version table is missing, or it holds more than one row;
* SQLite reports any error, including a lock held past the busy timeout.

The file is opened with ``mode=ro``, so nothing is written, not even a pragma. (For a database
in WAL mode SQLite may create the ``-wal``/``-shm`` files that accompany any open connection;
the next writer removes them when it closes.)
"""

from __future__ import annotations

import logging
import os
import sqlite3
from contextlib import closing
from pathlib import Path

from sharesync.state.records import CHECKPOINT_COLUMNS, Checkpoint, checkpoint_from_row
from sharesync.state.revisions import VERSION_TABLE, head_revision

log = logging.getLogger("sharesync.state")

# Shared with the SQLAlchemy engine (sharesync.state.database): how long to wait for another writer's lock.
SQLITE_BUSY_TIMEOUT_MS = 60_000

_SCHEMES = ("sqlite", "sqlite+pysqlite")

_SELECT_CHECKPOINTS = f"SELECT {', '.join(CHECKPOINT_COLUMNS)} FROM sharesync_checkpoints ORDER BY name"


def sqlite_file(url: str) -> Path | None:
    """The database file of a plain SQLite URL (``sqlite:///relative``, ``sqlite:////absolute``).

    ``None`` for any other URL, including SQLite URLs this simple reading could get wrong.
    """
    scheme, separator, database = url.partition(":///")
    if not separator or scheme not in _SCHEMES or not database:
        return None
    if any(char in database for char in "?#%") or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def read_checkpoints(url: str) -> list[Checkpoint] | None:
    """Every checkpoint in the SQLite store at ``url``, sorted by name; ``None`` if only
    :func:`sharesync.state.store.open_store` can tell (see the module docstring)."""
    path = sqlite_file(url)
    if path is None:
        return None
    try:
        return _read(path)
    except _Unanswered as reason:
        log.debug("state database '%s': %s; opening it through the state store", path, reason)
        return None


class _Unanswered(Exception):
    """Why the store has to answer instead."""


def _read(path: Path) -> list[Checkpoint]:
    if not path.is_file():
        raise _Unanswered("no database file yet")
    if not (os.access(path, os.R_OK | os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
        raise _Unanswered("the file or its directory is not writable")
    head = head_revision()
    try:
        with closing(_connect_read_only(path)) as connection:
            connection.execute("BEGIN")  # one snapshot for the revision and the checkpoints
            revisions = [row[0] for row in connection.execute(f"SELECT version_num FROM {VERSION_TABLE}")]
            if revisions != [head]:
                raise _Unanswered(f"schema revision {', '.join(revisions) or 'none'}, not the head {head}")
            rows = connection.execute(_SELECT_CHECKPOINTS).fetchall()
    except sqlite3.Error as error:
        raise _Unanswered(f"SQLite: {error}") from None
    try:
        return [checkpoint_from_row(row) for row in rows]
    except (TypeError, ValueError) as error:
        raise _Unanswered(f"unexpected checkpoint row: {error}") from None


def _connect_read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(
        f"{path.absolute().as_uri()}?mode=ro",
        uri=True,
        timeout=SQLITE_BUSY_TIMEOUT_MS / 1000,
        isolation_level=None,  # transactions are ours (BEGIN above), not the sqlite3 module's
    )
