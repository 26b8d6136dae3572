"""The processes a benchmark run talks to: the sharing server (``sharesync serve``) and, with
``--engine spark``, one Apache Spark Connect server whose memory and CPU are sampled per run.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from bench import workload as wl
from bench.measure import PYTHON, REPO, SHARESYNC, process_cpu

TOKEN = "bench-token"


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            try:
                todo.extend(int(child) for child in task.read_text().split())
            except OSError:
                continue
    return out


def _status_kib(pid: int, field_: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field_ + ":")), 0)
    except OSError:
        return 0


class SparkServer:
    """One Apache Spark Connect server with Delta (``deploy/spark/run.sh connect``, local[2]) on a free
    port, for the whole bench run; its memory is sampled (``VmRSS`` of its process tree) per run."""

    def __init__(self, work: Path, confs: list[str] = []) -> None:  # noqa: B006 - read only
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.remote = f"sc://127.0.0.1:{self.port}"
        self.log = work / "spark-server.log"
        env = {**os.environ, "SPARK_LOG_DIR": str(work / "spark-logs"), "SPARK_WORKER_DIR": str(work / "spark-work")}
        self.process = subprocess.Popen(
            ["bash", str(REPO / "deploy" / "spark" / "run.sh"), "connect", "--port", str(self.port),
             *(arg for conf in confs for arg in ("--conf", conf))],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, cwd=REPO, env=env, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 180
        while True:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the Spark Connect server did not start:\n{self.log.read_text()[-3000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.5)
        time.sleep(1.0)
        self.warm_up(work / "spark-warmup")

    def warm_up(self, path: Path) -> None:
        """One unmeasured Delta write and MERGE: the JVM's first statements (class loading, JIT) are
        not charged to whichever pipeline the interleaving happens to run first."""
        shutil.rmtree(path, ignore_errors=True)
        done = subprocess.run([PYTHON, "-m", "bench.spark_peer", "warmup", self.remote, str(path)],
                              capture_output=True, text=True, cwd=REPO)  # fmt: skip
        if done.returncode != 0 or '"warmup_rows": 1500' not in done.stdout:
            self.stop()
            raise SystemExit(f"the Spark Connect server's warm-up failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_kib(self) -> int:
        return sum(_status_kib(p, "VmRSS") for p in _tree(self.pid))

    def cpu(self) -> float:
        return sum(process_cpu(p) for p in _tree(self.pid))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # the group this server was started in, only
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class Server:
    """``sharesync serve ROOT`` as a subprocess on a free port; the profile it writes."""

    def __init__(self, root: Path, work: Path, label: str) -> None:
        self.profile = work / f"{label}.share"
        self.profile.unlink(missing_ok=True)
        self.log = work / f"{label}-server.log"
        self.process = subprocess.Popen(
            [SHARESYNC, "serve", str(root), "--port", "0", "--token", TOKEN, "--url-ttl", "86400",
             "--profile-out", str(self.profile)],
            stdout=open(self.log, "wb"), stderr=subprocess.STDOUT, cwd=REPO,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not self.profile.is_file() or not self.profile.read_text().strip().endswith("}"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the sharing server did not start:\n{self.log.read_text()}")
            time.sleep(0.05)
        time.sleep(0.2)  # the profile is written just before the loop starts serving

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def serving_root(work: Path, name: str, tables: dict[str, Path], extra: dict[str, Path] | None = None) -> Path:
    """A provider root of symlinks: ``bench/sales/<table>`` → generated tables, plus whole shares."""
    root = work / name
    shutil.rmtree(root, ignore_errors=True)
    (root / wl.SHARE / wl.SCHEMA).mkdir(parents=True)
    for table, path in tables.items():
        (root / wl.SHARE / wl.SCHEMA / table).symlink_to(path, target_is_directory=True)
    for share, path in (extra or {}).items():
        (root / share).symlink_to(path, target_is_directory=True)
    return root


class EngineSampler:
    """The Spark server's ``VmRSS`` (its process tree) every 50 ms while a child runs: its peak, and
    the server's CPU seconds over the run. A JVM keeps the heap it grew, so the peak includes what
    earlier runs left; VmHWM cannot be reset without restarting the server."""

    def __init__(self, spark: SparkServer) -> None:
        self.spark, self.peak, self.cpu_before = spark, spark.rss_kib(), spark.cpu()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.05):
            self.peak = max(self.peak, self.spark.rss_kib())

    def stop(self) -> tuple[float, float]:
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, self.spark.rss_kib())
        return self.peak / 1024, self.spark.cpu() - self.cpu_before

