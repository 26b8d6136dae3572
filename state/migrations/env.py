"""Alembic environment of the state store.

sharesync runs migrations itself (:mod:`sharesync.state.migrate`) and passes the connection it has
already locked in ``config.attributes["connection"]``, so the revision check and the upgrade
happen in one transaction. Developers creating a revision use the stand-alone path::

    alembic -c state/migrations/alembic.ini -x url=sqlite:///dev.db revision --autogenerate -m "..."
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from sharesync.state.models import Base
from sharesync.state.revisions import VERSION_TABLE

config = context.config


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def _run(connection: Connection) -> None:
    _configure(connection=connection, render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("pass the database with: alembic -c state/migrations/alembic.ini -x url=DATABASE_URL ...")
    return url


if context.is_offline_mode():
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    given = config.attributes.get("connection")
    if given is not None:
        _run(given)
    else:
        with create_engine(_url()).begin() as connection:
            _run(connection)
