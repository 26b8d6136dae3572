"""Apache Spark 4.2 + Delta Lake 4.4 as Spark Connect servers of their own, for the engine lanes.

``SparkConnect().start()`` runs ``deploy/spark/run.sh connect`` — the launcher users run — with
``--master local[2]`` on a free loopback port and returns its ``sc://`` URL once it accepts
connections. ``SparkCluster`` runs a standalone cluster behind it: ``run.sh master``, two
``run.sh worker`` processes (one core, 1 GiB each) and a Connect server whose ``--master`` is
the master's URL. ``stop()`` ends every process. Spark and the Delta jars come from the directory
``deploy/spark/fetch.sh`` filled: ``$SHARESYNC_SPARK_HOME`` as it is, else ``.engines/spark``,
which the suite fetches on first need (``support.installs``; the test session does it before the
first Spark lane starts, showing its progress). Never a skip: a fetch that fails (no Java, no
Maven) is the error of every Spark test, naming what is missing.
"""

from __future__ import annotations

import collections
import os
import re
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from support.installs import PROJECT, InstallFailed, install_once
from support.processes import stop_process

RUN = PROJECT / "deploy" / "spark" / "run.sh"
FETCH = PROJECT / "deploy" / "spark" / "fetch.sh"
START_TIMEOUT = 120.0
CONNECT_STARTED = re.compile(r"Spark Connect server started at: [\d.]+:(\d+)")
MASTER_STARTED = re.compile(r"Starting Spark master at (spark://[\d.]+:\d+)")
WORKER_REGISTERED = re.compile(r"Registering worker [\d.]+:\d+ with")
EXECUTOR_LAUNCHED = re.compile(r"Launching executor [\w-]+/\d+ on worker")


def spark_home(*, refresh: bool = False, echo: Callable[[str], None] | None = None) -> Path:
    """The Spark directory, fetched into ``.engines/spark`` if it is not there yet.

    ``refresh`` runs ``fetch.sh`` even over a finished directory, which it then leaves alone unless
    its stamp names other versions (the session does that once; its workers only check the stamp)."""
    if given := os.environ.get("SHARESYNC_SPARK_HOME"):
        if not (Path(given) / ".complete").exists():
            raise RuntimeError(
                f"no Apache Spark in SHARESYNC_SPARK_HOME={given}: run 'bash deploy/spark/fetch.sh' there "
                "or unset it (the suite then fetches into .engines/spark) — the Spark engine lanes never skip"
            )
        return Path(given)
    try:
        home = install_once("spark", ["bash", str(FETCH), "."], ready=None if refresh else ".complete", echo=echo)
    except InstallFailed as error:
        raise RuntimeError(f"Apache Spark could not be fetched — the Spark engine lanes never skip: {error}") from None
    return home


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SparkProcess:
    """One ``run.sh`` process whose log lines are kept (for the start line and for failures)."""

    def __init__(self, argv: Sequence[str], started: re.Pattern[str], name: str) -> None:
        self.argv = list(argv)
        self.started = started
        self.name = name
        self.lines: collections.deque[str] = collections.deque(maxlen=3000)
        self.match: re.Match[str] | None = None
        self._found = threading.Event()
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> re.Match[str]:
        env = {**os.environ, "SHARESYNC_SPARK_HOME": str(spark_home())}
        self._process = subprocess.Popen(
            ["bash", str(RUN), *self.argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self._reader = threading.Thread(target=self._read, daemon=True, name=f"{self.name}-log")
        self._reader.start()
        if not self._found.wait(START_TIMEOUT) or self.match is None:
            self.stop()
            raise RuntimeError(f"{self.name} did not start:\n" + "\n".join(list(self.lines)[-60:]))
        return self.match

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self.lines.append(line.rstrip())
            if self.match is None and (match := self.started.search(line)):
                self.match = match
                self._found.set()
        self._found.set()  # the process ended, started or not

    def seen(self, pattern: re.Pattern[str]) -> int:
        return sum(1 for line in list(self.lines) if pattern.search(line))

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, self._reader, grace=30)


class SparkConnect:
    """A Spark Connect server with Delta on loopback; ``master`` a local[N] or spark:// URL."""

    def __init__(self, master: str = "local[2]", confs: Sequence[str] = ()) -> None:
        self.port = free_port()
        argv = ["connect", "--master", master, "--port", str(self.port)]
        for conf in confs:
            argv += ["--conf", conf]
        self.process = SparkProcess(argv, CONNECT_STARTED, "spark-connect")

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def start(self) -> str:
        self.process.start()
        wait_for_port(self.port, self.process)
        return self.url

    def stop(self) -> None:
        self.process.stop()


class SparkCluster:
    """A standalone cluster (a master, ``workers`` workers) with a Connect server as its driver."""

    def __init__(self, workers: int = 2) -> None:
        self.master = SparkProcess(
            ["master", "--port", str(free_port()), "--webui-port", str(free_port())], MASTER_STARTED, "spark-master"
        )
        self.workers = workers
        self.worker_processes: list[SparkProcess] = []
        self.connect: SparkConnect | None = None

    @property
    def url(self) -> str:
        assert self.connect is not None, "not started"
        return self.connect.url

    def start(self) -> str:
        master_url = self.master.start().group(1)
        for _ in range(self.workers):
            worker = SparkProcess(
                ["worker", master_url, "--cores", "1", "--memory", "1g", "--webui-port", str(free_port())],
                re.compile(r"Successfully registered with master"),
                "spark-worker",
            )
            self.worker_processes.append(worker)
            worker.start()
        # Each executor takes its worker's one core; the driver asks for no more than the cluster has.
        # Sized like the launcher sizes a local master (run.sh): Spark's defaults of 50 log-replay
        # and 200 shuffle partitions are hundreds of second-long tasks per statement on two
        # single-core executors, minutes per history rewrite of a six-row table on a busy machine.
        self.connect = SparkConnect(
            master_url,
            confs=[
                f"spark.cores.max={self.workers}",
                "spark.executor.cores=1",
                "spark.executor.memory=768m",
                "spark.databricks.delta.snapshotPartitions=2",
                "spark.sql.shuffle.partitions=4",
            ],
        )
        return self.connect.start()

    def registered_workers(self) -> int:
        return self.master.seen(WORKER_REGISTERED)

    def executors_launched(self) -> int:
        return self.master.seen(EXECUTOR_LAUNCHED)

    def stop(self) -> None:
        if self.connect is not None:
            self.connect.stop()
        for worker in self.worker_processes:
            worker.stop()
        self.master.stop()


def wait_for_port(port: int, process: SparkProcess) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                process.stop()
                raise RuntimeError(f"{process.name} never accepted connections on {port}") from None
            time.sleep(0.05)
