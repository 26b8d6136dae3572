"""The Spark Connect engine of one config: the embedded Sail engine, or any ``sc://`` server.

sharesync speaks only the Spark Connect protocol, so the same jobs run on the
embedded Sail engine (default: started in-process on a free loopback port, ~0.5 s) and on
Apache Spark + Delta Lake (``spark.remote: sc://host:15002``). pyspark and pysail are
imported inside the functions: importing this module must stay free, because a sync that
finds nothing to do never needs an engine.

A :class:`SparkEngine` holds one config's session from first use until :meth:`SparkEngine.close`;
its owner is a :class:`~sharesync.pipelines.run.pass_resources.PassResources` (a pass, a Dagster
run), or a ``sync --every`` process across its passes. Threads of one pass share it, guarded by a lock.
pyspark is imported under that lock too (:func:`import_spark_modules`): its modules import each
other in cycles, and two threads importing them at once fail with "partially initialized module".

What stays per process is what Sail makes so (:class:`_EmbeddedSail`): the embedded server,
started once, and its object-store settings, which it reads from the process environment
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AZURE_STORAGE_…``; checked on pysail 0.7.2: each
session when it first reaches a store, kept for its life). The ``storage:`` settings become
environment variables before the engine first needs them, and a later config asking for
different values fails with a ConfigError instead of being reached with the wrong ones. A remote
Spark gets the per-bucket S3A settings it may take through Spark Connect; its credentials are
configured on the server.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import signal
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from sharesync.sync.core.config import SparkConfig
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.storage import StorageSection

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkEngine", "import_spark_modules", "session_of", "start_early", "stop_embedded_engine"]

# Spark's own default is the JVM's zone; sharesync stores and compares instants in UTC. Whether a
# target gets deletion vectors is set on each table as it is created (pipelines/targets/delta/write.py),
# not by the session's defaults.
_FIXED_CONF = {"spark.sql.session.timeZone": "UTC"}

# What the jobs import lazily, beyond what the Connect session module brings in.
_JOB_MODULES = ("pyspark.sql.functions", "pyspark.sql.window", "pyspark.errors.exceptions.connect")

_lock = threading.Lock()  # pyspark's imports, sessions' starts and the embedded server: one thread at a time


class _EmbeddedSail:
    """The embedded Sail server of this process and the object-store environment it was given.

    Process-wide because Sail is: it reads object-store settings from the process environment,
    and takes SIGINT over once per process. So it starts once, ``os.environ`` is written here only,
    and a second, different set of settings is refused. (The caller holds the lock.)
    """

    def __init__(self) -> None:
        self._server: Any = None  # pysail.spark.SparkConnectServer
        self._environment: dict[str, str] = {}  # storage settings given to it, ever

    def url(self, environment: dict[str, str]) -> str:
        """Its loopback Spark Connect URL, started on first use, with ``environment`` exported."""
        changed = sorted(k for k, v in environment.items() if self._environment.get(k, v) != v)
        if changed:
            raise ConfigError(
                f"storage: the embedded engine of this process already works with other settings "
                f"({', '.join(changed)}); its storage clients keep what they first read. Run one sharesync process "
                "per storage configuration, or a Spark Connect server (spark.remote)"
            )
        self._environment.update(environment)
        os.environ.update(environment)
        if self._server is None:
            # Sail logs every session at INFO, and warns about its own tasks on every shutdown; keep
            # output readable unless asked (RUST_LOG=warn or info shows the engine's own logs).
            os.environ.setdefault("RUST_LOG", "error")
            from pysail.spark import SparkConnectServer

            # Stop it before the interpreter tears down, or Sail warns about aborted tasks on exit.
            atexit.register(self.stop)
            server = SparkConnectServer("127.0.0.1", 0)
            server.start(background=True)
            self._server = server
        address = self._server.listening_address
        if address is None:  # pragma: no cover - start() returns only once the port is bound
            raise RuntimeError("the embedded Sail engine did not start listening")
        return f"sc://127.0.0.1:{address[1]}"

    def stop(self, url: str | None = None) -> None:
        """Stop the server (``url``: only while it is still the one serving there — a dead session's)."""
        server = self._server
        if server is None or (url is not None and url != f"sc://127.0.0.1:{server.listening_address[1]}"):
            return
        self._server = None
        server.stop()


_EMBEDDED = _EmbeddedSail()


class SparkEngine:
    """One config's Spark Connect session, made on first use and kept until :meth:`close`.

    ``storage``: the object-store settings the engine needs (the config's ``storage:``) — the
    embedded engine's environment, or a remote Spark's per-bucket S3A conf.
    """

    def __init__(self, config: SparkConfig | None = None, storage: StorageSection | None = None) -> None:
        self.config = config or SparkConfig()
        self.storage = storage or StorageSection()
        if self.config.remote is None:
            self.storage.engine_environment()  # one set for the embedded engine: a config that cannot work fails now
        self._session: SparkSession | None = None
        self._url: str | None = None

    def session(self) -> SparkSession:
        """The session; a new one when there is none yet or its holder stopped it (a test, a notebook)."""
        with _lock:
            if self._session is None or _stopped(self._session):
                _import_modules()
                remote = self.config.remote
                url = remote or _EMBEDDED.url(self.storage.engine_environment())
                conf = {**(self.storage.remote_spark_conf() if remote else {}), **self.config.conf}
                self._session, self._url = _connect(url, {**conf, **_FIXED_CONF}), url
                if remote is None:
                    keep_ctrl_c()
            return self._session

    def drop(self, dead: SparkSession | None = None) -> None:
        """Stop the session that died, and the embedded server it was on; the next job starts new ones.

        Only while ``dead`` is still this engine's session: tables running in parallel all see it
        die, and the first to stop it must not have a later one stop the one another table started.
        """
        with _lock:
            if dead is not None and dead is not self._session:
                return
            session, url, self._session = self._session, self._url, None
            if self.config.remote is None and url is not None:
                _EMBEDDED.stop(url)
        _close(session)

    def close(self) -> None:
        """End the session: a remote engine's holds state on a server others share."""
        with _lock:
            session, self._session = self._session, None
        _close(session)


def stop_embedded_engine() -> None:
    """Stop this process's embedded Sail server (tests; process exit does it too)."""
    with _lock:
        _EMBEDDED.stop()


def _close(session: SparkSession | None) -> None:
    if session is not None:
        with contextlib.suppress(Exception):  # the server may be gone already; leaving anyway
            session.stop()


def import_spark_modules() -> None:
    """Import the Spark Connect client and what the jobs use, one thread at a time.

    Threads that may run jobs at the same time call this before the first one does: the jobs
    import pyspark lazily, and pyspark cannot be imported by two threads at once.
    """
    with _lock:
        _import_modules()


def _import_modules() -> None:
    """(The caller holds the lock.)"""
    from sharesync.pipelines.jobs.spark_import import import_spark_connect

    import_spark_connect()
    for module in _JOB_MODULES:
        importlib.import_module(module)


def session_of(spark: SparkSession | Callable[[], SparkSession]) -> SparkSession:
    """Jobs accept a session or a factory (``engine.session``), so an empty batch
    returns before the factory is called and never starts an engine."""
    return spark() if callable(spark) else spark


def start_early(spark: SparkSession | Callable[[], SparkSession]) -> Callable[[], SparkSession]:
    """Have the factory ``spark`` start its session in a thread now; the returned function waits for it.

    A job whose Arrow work comes first (history mode's planning) overlaps the engine's start with
    it. The wait, on the main thread, gives SIGINT back to Python as a start there would
    (:func:`keep_ctrl_c`); an error of the start is raised by the wait.
    """
    if not callable(spark):
        return lambda: spark
    started: Future[SparkSession] = Future()

    def start() -> None:
        try:
            started.set_result(spark())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiter, which raises it
            started.set_exception(exc)

    threading.Thread(target=start, name="sharesync-engine-start", daemon=True).start()

    def wait() -> SparkSession:
        session = started.result()
        keep_ctrl_c()
        return session

    return wait


def _stopped(session: SparkSession) -> bool:
    # ``is_stopped`` is the Connect session's; the classic SparkSession the type names lacks it.
    return getattr(session, "is_stopped", False) is True


def keep_ctrl_c() -> None:
    """Give SIGINT back to Python after the embedded engine's first session.

    Sail then installs a SIGINT handler of its own, with SA_RESTART: a Python thread blocked on a
    lock (the main thread waiting for tables syncing in parallel, ``demo --keep-serving``) never
    wakes up for Ctrl+C any more. It does so once per process; only the main thread may undo it,
    which is why a parallel pass starts the engine there (``Syncer`` in :mod:`sharesync.pipelines.run.sync_pass`).
    """
    handler = signal.getsignal(signal.SIGINT)
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)


def _connect(url: str, conf: dict[str, str]) -> SparkSession:
    # The Connect builder directly: the classic builder's create() would look for a JVM.
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    builder = ConnectSession.builder.remote(url)
    for name, value in conf.items():
        builder = builder.config(name, value)
    # create(), not getOrCreate(): the latter hands back whatever default session exists,
    # even one connected to a different URL.
    session = builder.create()
    for name, value in conf.items():  # some servers ignore builder conf on connect; set explicitly
        session.conf.set(name, value)
    # The Connect session implements the public SparkSession API, which is what callers use.
    return cast("SparkSession", session)
