"""A Sail Spark Connect server of its own, for tests against a ``spark.remote`` engine.

``SailServer(workers=2).start()`` runs ``sail spark server --port 0`` in a subprocess with
``SAIL_MODE=local-cluster`` and ``SAIL_CLUSTER__WORKER_INITIAL_COUNT=2`` (pysail 0.7: a
driver and two workers that talk over RPC; the mode a Kubernetes cluster runs with pods), reads
the port it bound from its log, waits until it accepts connections and returns its ``sc://``
URL; ``stop()`` ends it. ``workers=0`` runs the plain single-node mode. ``prefix`` runs the
server under another command — ``unshare`` gives it a different view of the filesystem, the way
a remote cluster has one.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from support.processes import stop_process

STARTED = re.compile(r"Spark Connect server on [\d.]+:(\d+)")
WORKER_STARTED = re.compile(r"starting worker (\d+)")
START_TIMEOUT = 60.0
# The server's own start line and its workers' lifecycle; everything else at warn.
LOG_FILTER = "warn,sail_cli=info,sail_execution::driver::worker_pool=info"


def sail_binary() -> str:
    """The ``sail`` command pysail installs next to this interpreter (or on PATH)."""
    beside = Path(sys.executable).with_name("sail")
    found = str(beside) if beside.exists() else shutil.which("sail")
    if found is None:
        raise RuntimeError("the 'sail' command (pysail) is not installed")
    return found


class SailServer:
    """One ``sail spark server`` subprocess; its log lines are kept for assertions."""

    def __init__(self, workers: int = 2, *, prefix: Sequence[str] = (), cwd: Path | None = None) -> None:
        self.workers = workers
        self.prefix = list(prefix)
        self.cwd = cwd
        self.lines: collections.deque[str] = collections.deque(maxlen=2000)
        self.port: int | None = None
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self.port is not None, "not started"
        return f"sc://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        env = {**os.environ, "RUST_LOG": LOG_FILTER}
        if self.workers:
            env |= {"SAIL_MODE": "local-cluster", "SAIL_CLUSTER__WORKER_INITIAL_COUNT": str(self.workers)}
        return env

    def start(self) -> str:
        argv = [*self.prefix, sail_binary(), "spark", "server", "--ip", "127.0.0.1", "--port", "0"]
        self._process = subprocess.Popen(
            argv, env=self.environment(), cwd=self.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        found = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(found,), daemon=True, name="sail-log")
        self._reader.start()
        if not found.wait(START_TIMEOUT) or self.port is None:
            self.stop()
            raise RuntimeError("the Sail server did not start:\n" + "\n".join(self.lines))
        self._wait_for_port()
        return self.url

    def _read(self, found: threading.Event) -> None:
        assert self._process is not None and self._process.stderr is not None
        for line in self._process.stderr:
            self.lines.append(line.rstrip())
            match = STARTED.search(line)
            if match and self.port is None:
                self.port = int(match.group(1))
                found.set()
        found.set()  # the process ended (before or after starting)

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        assert self.port is not None
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline or (self._process is not None and self._process.poll() is not None):
                    self.stop()
                    raise RuntimeError(
                        "the Sail server never accepted connections:\n" + "\n".join(self.lines)
                    ) from None
                time.sleep(0.05)

    def workers_started(self) -> set[int]:
        """The workers the driver started so far (local-cluster mode starts them with the first job)."""
        return {int(m.group(1)) for line in list(self.lines) if (m := WORKER_STARTED.search(line))}

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            stop_process(process, self._reader, grace=15)


def private_mount_prefix(hidden: Path) -> list[str] | None:
    """A command prefix that runs a process with an empty tmpfs over ``hidden``: it cannot see
    what this process writes there (a user and mount namespace; no root needed). None when the
    kernel or the container forbids it."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    prefix = [unshare, "--user", "--map-root-user", "--mount", "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"']
    probe = subprocess.run([*prefix, str(hidden), "true"], capture_output=True, check=False)
    return [*prefix, str(hidden)] if probe.returncode == 0 else None
