"""One Spark Connect session per process: the embedded Sail engine, or any ``sc://`` server.

The sync engine speaks only the Spark Connect protocol, so the same jobs run on the
embedded Sail engine (default: started in-process on a free loopback port, ~0.5 s) and on
Apache Spark + Delta Lake (``spark.remote: sc://host:15002``). pyspark and pysail are
imported inside the functions: importing this module must stay free, because a sync that
finds nothing to do never needs an engine.

Sessions are cached per configuration and guarded by a lock, so concurrent Dagster steps in
one process share one engine instead of racing to start several. pyspark is imported under that
lock too (:func:`import_spark_modules`): its modules import each other in cycles, and two threads
importing them at once (tables of one pass in parallel) fail with "partially initialized module".

Object storage (:mod:`sharesync.sync.core.storage`): the embedded engine reads its settings from
the environment of this process (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AZURE_STORAGE_…``),
and its storage clients keep what they first read — credentials for the life of the process. So
the ``storage:`` settings become environment variables before the engine first needs them, and a
later config asking for different values fails with a ConfigError instead of being ignored. A
remote Spark gets the per-bucket S3A settings it may take through Spark Connect; its credentials
are configured on the server.
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

__all__ = [
    "get_spark",
    "import_spark_modules",
    "release_remote_sessions",
    "session_of",
    "start_early",
    "stop_spark",
]

# Spark's own default is the JVM's zone; sharesync stores and compares instants in UTC. Tables
# the session creates get no deletion vectors, whatever the platform's default (Databricks turns
# them on): targets must stay MERGE-updatable (pipelines/jobs/target.py refuses targets with them).
_FIXED_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
}

# What the jobs import lazily, beyond what the Connect session module brings in.
_JOB_MODULES = ("pyspark.sql.functions", "pyspark.sql.window", "pyspark.errors.exceptions.connect")

_lock = threading.Lock()
_server: Any = None  # pysail.spark.SparkConnectServer, started at most once per process
_sessions: dict[tuple[str | None, tuple[tuple[str, str], ...]], SparkSession] = {}
_engine_environment: dict[str, str] = {}  # storage settings given to the embedded engine, ever


def get_spark(config: SparkConfig | None = None, storage: StorageSection | None = None) -> SparkSession:
    """The cached session for ``config``; starts the embedded Sail engine on first use.

    ``storage``: the object-store settings the engine needs (the config's ``storage:``) — the
    embedded engine's environment, or a remote Spark's per-bucket S3A conf.
    """
    config = config or SparkConfig()
    storage = storage or StorageSection()
    conf = {**(storage.remote_spark_conf() if config.remote else {}), **config.conf}
    key = (config.remote, tuple(sorted(conf.items())))
    with _lock:
        if config.remote is None:
            _export_environment(storage.engine_environment())
        session = _sessions.get(key)
        if session is None or _stopped(session):  # stopped by its holder (a test, a notebook): a new one
            _import_modules()
            url = config.remote or _embedded_url()
            session = _connect(url, {**conf, **_FIXED_CONF})
            if config.remote is None:
                keep_ctrl_c()
            _sessions[key] = session
        return session


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


def _export_environment(wanted: dict[str, str]) -> None:
    """Give the embedded engine the storage settings, as the environment it reads (caller holds the lock)."""
    changed = sorted(k for k, v in wanted.items() if _engine_environment.get(k, v) != v)
    if changed:
        raise ConfigError(
            f"storage: the embedded engine of this process already works with other settings ({', '.join(changed)}); "
            "its storage clients keep what they first read. Run one sharesync process per storage configuration, "
            "or a Spark Connect server (spark.remote)"
        )
    _engine_environment.update(wanted)
    os.environ.update(wanted)


def session_of(spark: SparkSession | Callable[[], SparkSession]) -> SparkSession:
    """Jobs accept a session or a factory (``lambda: get_spark(config)``), so an empty batch
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


def stop_spark(only: SparkSession | None = None) -> None:
    """Close every cached session and stop the embedded engine (tests, process shutdown).

    ``only``: do so only while that session is still cached — a caller whose session died
    must not stop the new one another thread started meanwhile.
    """
    global _server
    with _lock:
        if only is not None and all(session is not only for session in _sessions.values()):
            return
        sessions = list(_sessions.values())
        _sessions.clear()
        server, _server = _server, None
    for session in sessions:
        with contextlib.suppress(Exception):  # the server may be gone already; shutting down anyway
            session.stop()
    if server is not None:
        server.stop()


def _stopped(session: SparkSession) -> bool:
    # ``is_stopped`` is the Connect session's; the classic SparkSession the type names lacks it.
    return getattr(session, "is_stopped", False) is True


def release_remote_sessions() -> None:
    """Close the sessions of remote engines: they hold state on a server others share. The
    embedded engine's sessions end with its process (``sharesync`` exits without stopping it)."""
    with _lock:
        remote = [key for key in _sessions if key[0] is not None]
        stopping = [_sessions.pop(key) for key in remote]
    for session in stopping:
        with contextlib.suppress(Exception):  # the server may be gone already; leaving anyway
            session.stop()


def _embedded_url() -> str:
    """Start Sail once (caller holds the lock) and return its loopback Spark Connect URL."""
    global _server
    if _server is None:
        # Sail logs every session at INFO, and warns about its own tasks on every shutdown; keep
        # output readable unless asked (RUST_LOG=warn or info shows the engine's own logs).
        os.environ.setdefault("RUST_LOG", "error")
        from pysail.spark import SparkConnectServer

        # Stop it before the interpreter tears down, or Sail warns about aborted tasks on exit.
        atexit.register(stop_spark)
        server = SparkConnectServer("127.0.0.1", 0)
        server.start(background=True)
        _server = server
    address = _server.listening_address
    if address is None:  # pragma: no cover - start() returns only once the port is bound
        raise RuntimeError("the embedded Sail engine did not start listening")
    return f"sc://127.0.0.1:{address[1]}"


def keep_ctrl_c() -> None:
    """Give SIGINT back to Python after the embedded engine's first session.

    Sail then installs a SIGINT handler of its own, with SA_RESTART: a Python thread blocked on a
    lock (the main thread waiting for tables syncing in parallel, ``demo --keep-serving``) never
    wakes up for Ctrl+C any more. It does so once per process; only the main thread may undo it,
    which is why a parallel pass starts the engine there (``SyncEngine._start_engine``).
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
