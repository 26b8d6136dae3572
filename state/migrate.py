"""Schema migrations, applied by sharesync itself when a store is opened.

Alembic is driven in code, with ``script_location`` inside this package, so migrations run
from an installed wheel as well as from a checkout (the scripts ship as package data).

Two guarantees:

* **A database written by a newer sharesync is never touched.** Before anything else the
  stored revision is compared with the revisions this package ships; an unknown one raises
  :class:`StateSchemaTooNew` after a read-only look (no version table is created, no
  pragma that writes is needed, nothing is migrated).
* **Concurrent openers migrate once.** Twenty Dagster runs opening a fresh database at the
  same moment serialise on a lock (SQLite: the ``BEGIN IMMEDIATE`` write lock; PostgreSQL: a
  transaction-scoped advisory lock), re-read the revision under it, and only the first one
  upgrades. The upgrade runs in that same transaction, so a crash leaves the old schema.
"""

from __future__ import annotations

import logging
from importlib import metadata
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text

from sharesync.state.database import Database, database_for, parse_url, prepare_sqlite_file, sqlite_path
from sharesync.state.revisions import MIGRATIONS_DIR, VERSION_TABLE, head_revision, known_revisions
from sharesync.sync.core.errors import StateError, StateSchemaTooNew

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger("sharesync.state")

# pg_advisory_xact_lock key: any constant unique to sharesync ("shrsync" in ASCII).
_PG_MIGRATION_LOCK = 0x73687273796E63

# Opening a store whose schema is current must not pay for importing Alembic (~0.3 s of CPU
# in every one of 20 parallel run processes): the shipped revisions come from the scripts'
# file names (sharesync.state.revisions). Alembic is imported only to upgrade.


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _stored_revision(conn: Connection) -> str | None:
    """The revision in our version table, read with plain SQL (nothing is created)."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    heads = list(conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars())
    if len(heads) > 1:
        raise StateError(f"state database has several schema heads {sorted(heads)}; it was edited by hand")
    return heads[0] if heads else None


def _refuse_unknown(db: Database, revision: str | None) -> None:
    if revision is None or revision in known_revisions():
        return
    try:
        ours = metadata.version("sharesync")
    except metadata.PackageNotFoundError:
        ours = "this checkout"
    raise StateSchemaTooNew(
        f"state database {db.display_url} has schema revision '{revision}', which sharesync {ours} does not "
        f"know (newest known: '{head_revision()}'): a newer sharesync upgraded it. Upgrade sharesync; "
        "nothing was written"
    )


def ensure_schema(db: Database) -> str:
    """Bring ``db`` to the head revision (no-op when already there); return the head."""
    with db.read("reading the schema revision") as conn:
        current = _stored_revision(conn)
    _refuse_unknown(db, current)
    head = head_revision()
    if current != head:
        _upgrade_locked(db, "head")
    return head


def _upgrade_locked(db: Database, target: str) -> tuple[str | None, str | None]:
    # Imported before taking the lock, which every other writer of the database waits for.
    from alembic import command
    from alembic.util import CommandError

    wanted = head_revision() if target == "head" else target
    with db.write("migrating the schema") as conn:
        if db.dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        before = _stored_revision(conn)  # re-read under the lock: another opener may have migrated
        _refuse_unknown(db, before)
        if before == wanted:
            return before, before
        try:
            command.upgrade(_config(conn), target)
        except CommandError as error:
            raise StateError(f"cannot migrate state database {db.display_url} to '{target}': {error}") from None
        after = _stored_revision(conn)
    if before != after:
        log.info("migrated state database %s from %s to %s", db.display_url, before or "empty", after)
    return before, after


def upgrade(url: str, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate the database at ``url`` to ``revision``; return (revision before, after).

    Operators who prefer explicit migrations run this through ``sharesync db upgrade``;
    :func:`sharesync.state.open_store` calls the same code path implicitly.
    """
    parsed = parse_url(url)
    prepare_sqlite_file(parsed)
    db = database_for(parsed)
    return _upgrade_locked(db, revision)


def current_revision(url: str) -> str | None:
    """The stored revision, read without writing (a missing SQLite file is not created).

    Raises :class:`StateSchemaTooNew` when the revision is unknown to this sharesync.
    """
    parsed = parse_url(url)
    path = sqlite_path(parsed)
    if path is not None and not path.exists():
        return None
    db = database_for(parsed)
    with db.read("reading the schema revision") as conn:
        revision = _stored_revision(conn)
    _refuse_unknown(db, revision)
    return revision
