"""Which schema revisions this sharesync ships, known without importing SQLAlchemy or Alembic.

Revisions are a linear, zero-padded sequence and the migration scripts are named
``<revision>_<slug>.py`` (``alembic.ini``'s ``file_template``), so the file names alone say
which revisions exist and which is the head. ``tests/state/test_migrations.py`` checks that
Alembic's own view of the scripts agrees. Opening a current store (:mod:`sharesync.state.migrate`) and
the read-only checkpoint reader (:mod:`sharesync.state.sqlite`) both compare the stored revision with
:func:`head_revision`; neither may pay for importing Alembic to do so.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

# Alembic's version table, prefixed like every sharesync table (see sharesync.state.models).
VERSION_TABLE = "sharesync_alembic_version"

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
VERSIONS_DIR = MIGRATIONS_DIR / "versions"


@cache
def known_revisions() -> frozenset[str]:
    """Every schema revision this sharesync ships."""
    return frozenset(path.name.split("_", 1)[0] for path in VERSIONS_DIR.glob("*.py") if not path.name.startswith("__"))


def head_revision() -> str:
    """The newest schema revision this sharesync ships."""
    revisions = known_revisions()
    assert revisions, f"no migration scripts in {VERSIONS_DIR}"
    return max(revisions)
