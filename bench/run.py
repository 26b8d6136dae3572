"""The sharesync benchmark (issues 7, 16): sharesync vs the peer pipeline vs the limit, per workload shape.

    .venv/bin/python -m bench.run                               # every shape, 3 runs each
    .venv/bin/python -m bench.run --shape narrow small          # some shapes
    .venv/bin/python -m bench.run --scale 0.05 --runs 1         # the harness end to end, small data

Shapes (``bench.workload.SHAPES``): ``narrow``, ``wide-strings``, ``small``, ``M``, ``L``, ``dv``, and the
size curve ``xl-1m`` … ``xl-20m`` (``--shape xl``; not in ``all``). One
sharing server subprocess (``sharesync serve``, URL lifetime one day) serves every generated
table over loopback. Every measured step is a fresh child process; the harness takes its wall
time (monotonic clock around ``fork`` … ``os.wait4``) and its peak RSS and CPU time from
``wait4``'s rusage (the child's own ``ru_maxrss``: sharesync's embedded Sail engine runs inside
that process, so it is included). Runs are interleaved (the pipeline order rotates per run) so
load from elsewhere hits all of them alike; medians are reported.

Scenarios per shape:

* ``bootstrap``   — fresh target and state; sync the latest snapshot.
* ``incremental`` — from a target and checkpoint at the version before the change versions:
  set up once (unmeasured) through a second, short-lived server whose copy of the table
  stops at that version (same table id and files), then copied back before every run.
* ``warm``        — the incremental batch as the second pass of one process, as ``sharesync
  sync --every`` runs it (``bench.probe warm``: first a bootstrap pass of the same table into
  another target, then the measured pass); the pass's own wall time.
* ``noop``        — ``sharesync sync`` when nothing is new (process wall time), and the
  in-process ``SyncEngine.sync_all()`` call (``bench.probe noop``).
* ``poll``        — ``SyncEngine.source_versions()`` over 1,000 configured tables
  (``bench.probe poll``); measured once, not per shape.
* ``history``     — the incremental batch in history mode vs merge mode (``bench.history``;
  issue 14's goal: ≤ 1.5× merge mode in wall time and peak RSS).

After each scenario both targets must equal the provider's table at its latest version (every
column, every row). ``--phases`` adds one instrumented sharesync run per scenario
(``bench.phases``): where its time goes. Results: a table on stdout, the goals of issue 16 with
PASS/MISS, and ``<results>/<stamp>.json`` / ``.md`` (default ``bench/results``, gitignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bench import workload as wl

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
VENV_BIN = Path(sys.executable).parent
PYTHON = sys.executable
SHARESYNC = str(VENV_BIN / "sharesync")
RESULTS = BENCH / "results"
TOKEN = "bench-token"
PIPELINES = ("sharesync", "peer", "limit", "sail")  # sail: sharesync on embedded Sail, with --engine spark
# --engine spark: the Spark Connect URL of the one Apache Spark server of the run (None: embedded Sail)
REMOTE: str | None = None
SCENARIOS = ("bootstrap", "incremental", "warm", "noop", "poll", "history")
RSS_LIMIT_KB = 16 * 2**20  # a child above this is killed and the run stops (--rss-limit-gib)
# Peer targets wrong by construction, not by chance: their time is reported, their correctness is
# not checked (bench/README.md, "Deletion vectors"). Re-check when a delta-kernel-rust-sharing-wrapper
# built on delta_kernel >= 0.27 is on PyPI (tests/sync/delta/test_dv_change_feeds.py then fails).
PEER_WRONG_BY_CONSTRUCTION = {
    "dv-incremental": "the connector's DV change feeds come from delta_kernel 0.22.0, which applies a "
    "version's DV difference to the first 1,024-row batch of each file only (fixed in 0.27.0, delta-kernel-rs #3077)",
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------- measuring a child process


@dataclass
class Measure:
    wall: float
    maxrss_mib: float
    cpu: float  # user + system seconds of the child
    server_cpu: float  # CPU seconds the sharing server spent meanwhile
    load: float  # 1-minute load average when the run started
    output: dict = field(default_factory=dict)  # the child's last JSON line, if any
    engine_rss_mib: float = 0.0  # --engine spark: the Spark server's peak VmRSS sampled during the run
    engine_cpu: float = 0.0  # --engine spark: CPU seconds the Spark server spent during the run


def _server_cpu(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


# Children are started by a tiny launcher, never forked from this process directly: on Linux a
# child's ru_maxrss starts at the RSS of the process it was forked from (exec records the old
# mm's high-water mark), so a child of this harness (which may have generated a 1 GB workload)
# would report at least the harness's size. The launcher is a bare ``python -I -S`` (~10 MiB,
# reported as the floor); it forks, execs the real child and reports the child's wait4 rusage.
_LAUNCHER = r"""
import json, os, sys, time
spec = json.loads(sys.argv[1])
fd = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
began = time.monotonic()
pid = os.fork()
if pid == 0:
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.chdir(spec["cwd"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])
killed = False
while True:  # poll (20 ms) so a runaway child can be stopped before it takes the machine down
    done, status, ru = os.wait4(pid, os.WNOHANG)
    if done:
        break
    wall = time.monotonic() - began
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
    except OSError:
        rss = 0
    if rss > spec["rss_limit_kb"] and not killed:
        os.kill(pid, 9)
        killed = True
    time.sleep(0.02)
wall = time.monotonic() - began
print(json.dumps({"wall": wall, "status": os.waitstatus_to_exitcode(status), "maxrss_kb": ru.ru_maxrss,
                  "cpu": ru.ru_utime + ru.ru_stime, "killed_for_rss": killed}))
"""


def run_child(
    argv: list[str],
    *,
    log_to: Path,
    env: dict[str, str] | None = None,
    server_pid: int | None = None,
    check: bool = True,
) -> Measure:
    """Run ``argv`` to completion; wall time, peak RSS and CPU from ``wait4`` (via the launcher)."""
    log_to.parent.mkdir(parents=True, exist_ok=True)
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("SHARESYNC_")}
    child_env.update(env or {})
    load = os.getloadavg()[0]
    server_before = _server_cpu(server_pid)
    spec = {"argv": argv, "env": child_env, "cwd": str(REPO), "log": str(log_to), "rss_limit_kb": RSS_LIMIT_KB}
    done = subprocess.run([PYTHON, "-I", "-S", "-c", _LAUNCHER, json.dumps(spec)], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"launcher failed: {done.stderr}")
    usage = json.loads(done.stdout)
    if usage["killed_for_rss"]:
        raise SystemExit(f"child killed at {RSS_LIMIT_KB / 2**20:.1f} GiB RSS (--rss-limit-gib): {' '.join(argv)}")
    if check and usage["status"] != 0:
        tail = log_to.read_text(errors="replace")[-3000:]
        raise SystemExit(f"child failed ({usage['status']}): {' '.join(argv)}\n{tail}")
    output: dict = {}
    for line in reversed(log_to.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                output = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    return Measure(
        usage["wall"], usage["maxrss_kb"] / 1024, usage["cpu"], _server_cpu(server_pid) - server_before, load, output
    )


def rss_floor(work: Path) -> float:
    """Peak RSS the launcher reports for a do-nothing child (``/bin/true``): the measurement floor."""
    return run_child(["/bin/true"], log_to=work / "logs" / "floor.log").maxrss_mib


# ---------------------------------------------------------------- servers


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
        return sum(_server_cpu(p) for p in _tree(self.pid))

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


# ---------------------------------------------------------------- pipelines and start states


def write_config(
    directory: Path,
    profile: Path,
    tables: list[str],
    *,
    max_versions: int | None = None,
    mode: str = "merge",
    embedded: bool = False,
) -> Path:
    """``embedded``: Sail inside the process even with ``--engine spark`` (the ``sail`` pipeline)."""
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "profile": str(profile),
        "state_store": f"sqlite:///{directory / 'state.db'}",
        "staging_dir": str(directory / "staging"),
        "tables": [
            {"name": name, "target": str(directory / ("target" if len(tables) == 1 else f"target-{i}")),
             "keys": ["id"], "mode": mode}
            for i, name in enumerate(tables)
        ],
    }  # fmt: skip
    if max_versions is not None:
        config["defaults"] = {"max_versions_per_batch": max_versions}
    if REMOTE is not None and not embedded:
        config["spark"] = {"remote": REMOTE}
    path = directory / "sharesync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def sharesync_argv(config: Path) -> list[str]:
    return [SHARESYNC, "--config", str(config), "sync"]


def peer_argv(profile: Path, table: str, target: Path, *args: str, delta_format: bool = False) -> list[str]:
    """``delta_format``: the table needs the delta response format (deletion vectors). With
    ``--engine spark`` the peer is ``bench.spark_peer`` on the same Spark server."""
    module = ["bench.peer"] if REMOTE is None else ["bench.spark_peer", "--remote", REMOTE]
    return [PYTHON, "-m", *module, "--profile", str(profile), "--table", table, "--target", str(target),
            *(["--delta-format"] if delta_format else []), *args]  # fmt: skip


def limit_argv(profile: Path, table: str, *args: str, delta_format: bool = False) -> list[str]:
    return [PYTHON, "-m", "bench.limit", "--profile", str(profile), "--table", table,
            *(["--delta-format"] if delta_format else []), *args]  # fmt: skip


def restore(seed: Path, directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(seed, directory, symlinks=True)


def remove(*paths: Path) -> None:
    for path in paths:
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def sharesync_bootstrap(
    base: Path, profile: Path, table: str, *, embedded: bool = False
) -> tuple[Path, Callable[[], None]]:
    """A bootstrap run directory: its config, and what makes it fresh before every run."""
    directory = base / ("sail-boot" if embedded else "ss-boot")
    config = write_config(directory, profile, [table], embedded=embedded)
    return config, lambda: remove(directory / "target", directory / "staging", directory / "state.db")


@dataclass(frozen=True)
class StartState:
    """Run directories at the workload's start version, and their pristine copies (seeds)."""

    config: Path  # sharesync's config (in ``sharesync``), profile: the measuring server
    sharesync: Path
    sharesync_seed: Path
    peer: Path
    peer_seed: Path
    sail_config: Path | None = None  # --engine spark: sharesync on embedded Sail, its own start state
    sail: Path | None = None
    sail_seed: Path | None = None

    def restore_sharesync(self) -> None:
        restore(self.sharesync_seed, self.sharesync)

    def restore_sail(self) -> None:
        assert self.sail is not None and self.sail_seed is not None
        restore(self.sail_seed, self.sail)

    def restore_peer(self) -> None:
        restore(self.peer_seed, self.peer)


def start_state(base: Path, w: wl.Workload, profile: Path, *, peer: bool = True,
                max_versions: int | None = None, sail: bool = False) -> StartState:  # fmt: skip
    """Sync sharesync (and the peer, and sharesync on Sail) to the start version through a server
    that stops there."""
    sail_dirs = {}
    if sail:
        sail_dirs = {"sail_config": write_config(base / "sail-inc", profile, [w.full_name], max_versions=max_versions,
                                                 embedded=True),
                     "sail": base / "sail-inc", "sail_seed": base / "sail-inc-seed"}  # fmt: skip
        remove(base / "sail-inc" / "target", base / "sail-inc" / "staging", base / "sail-inc" / "state.db")
    state = StartState(write_config(base / "ss-inc", profile, [w.full_name], max_versions=max_versions),
                       base / "ss-inc", base / "ss-inc-seed", base / "peer-inc", base / "peer-inc-seed",
                       **sail_dirs)  # fmt: skip
    remove(state.sharesync / "target", state.sharesync / "staging", state.sharesync / "state.db", state.peer)
    at_start = serving_root(base, "root-start", {w.name: wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name})
    server = Server(at_start, base, "start")
    try:
        run_child(sharesync_argv(state.config), log_to=base / "logs" / "setup-sharesync.log",
                  env={"SHARESYNC_PROFILE": str(server.profile)})  # fmt: skip
        if state.sail_config is not None:
            run_child(sharesync_argv(state.sail_config), log_to=base / "logs" / "setup-sail.log",
                      env={"SHARESYNC_PROFILE": str(server.profile)})  # fmt: skip
        if peer:
            state.peer.mkdir(parents=True)
            run_child(peer_argv(server.profile, w.full_name, state.peer / "target", "bootstrap",
                                delta_format=w.deletion_vectors),
                      log_to=base / "logs" / "setup-peer.log")  # fmt: skip
    finally:
        server.stop()
    restore(state.sharesync, state.sharesync_seed)
    if state.sail is not None and state.sail_seed is not None:
        restore(state.sail, state.sail_seed)
    if peer:
        restore(state.peer, state.peer_seed)
    return state


def verify(w: wl.Workload, targets: dict[str, Path | str], storage_options: dict[str, str] | None = None) -> None:
    """Every target equals the provider's table at its latest version: all columns, all rows."""
    from deltalake import DeltaTable

    expected = wl.provider_table(w)
    names = expected.column_names
    for pipeline, path in targets.items():
        got = (
            DeltaTable(str(path), storage_options=storage_options)
            .to_pyarrow_table(columns=names)
            .select(names)
            .cast(expected.schema)
            .sort_by("id")
        )
        if got.num_rows != expected.num_rows:
            raise SystemExit(f"{pipeline} target {path}: {got.num_rows:,} rows, the provider has {expected.num_rows:,}")
        differ = [n for n in names if not got.column(n).equals(expected.column(n))]
        if differ:
            raise SystemExit(f"{pipeline} target {path}: columns {differ} differ from the provider's")


class _EngineSampler:
    """The Spark server's ``VmRSS`` (its process tree) every 50 ms while a child runs: its peak, and
    the server's CPU seconds over the run. A JVM keeps the heap it grew, so the peak includes what
    earlier runs left; VmHWM cannot be reset without restarting the server."""

    def __init__(self, spark: SparkServer) -> None:
        import threading

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


def _ratio(mine: dict | None, other: dict | None, field_: str) -> str:
    return f"{mine[field_] / other[field_]:.2f}" if mine and other and other[field_] else "–"


# ---------------------------------------------------------------- scenarios


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.runs = args.runs
        self.results: dict[str, dict] = {}
        self.phases: dict[str, dict] = {}
        self.findings: list[str] = []  # what went wrong with a pipeline that is not sharesync
        self.spark: SparkServer | None = None  # --engine spark: the run's Spark Connect server

    def measure(self, scenario: str, pipeline: str, argv: list[str], *, before: Callable[[], None] | None = None,
                env: dict[str, str] | None = None, rows: int | None = None) -> None:  # fmt: skip
        key = f"{scenario}/{pipeline}"
        entry = self.results.setdefault(key, {"scenario": scenario, "pipeline": pipeline, "rows": rows, "runs": []})
        if before is not None:
            before()
        index = len(entry["runs"]) + 1
        sampler = _EngineSampler(self.spark) if self.spark is not None else None
        m = run_child(argv, log_to=self.work / "logs" / f"{scenario}-{pipeline}-{index}.log", env=env,
                      server_pid=self.server.pid)  # fmt: skip
        if sampler is not None:
            m.engine_rss_mib, m.engine_cpu = sampler.stop()
        entry["runs"].append(asdict(m))
        engine = f"  spark {m.engine_rss_mib:6.0f} MiB cpu {m.engine_cpu:5.1f} s" if sampler is not None else ""
        log(f"  {key:<36} run {index}: {m.wall:7.2f} s  {m.maxrss_mib:8.0f} MiB  cpu {m.cpu:6.1f} s"
            f"  server cpu {m.server_cpu:5.1f} s{engine}  load {m.load:4.1f}")  # fmt: skip

    def interleaved(self, scenario: str, jobs: dict[str, tuple]) -> None:
        """Each pipeline ``runs`` times, the order rotating per run."""
        names = [p for p in PIPELINES if p in jobs and p in self.args.pipelines]
        for run in range(self.runs):
            for name in names[run % len(names) :] + names[: run % len(names)]:
                argv, before, rows = jobs[name]
                self.measure(scenario, name, argv, before=before, rows=rows)

    def breakdown(self, scenario: str, config: Path, prepare: Callable[[], None]) -> None:
        """With ``--phases``: one instrumented sharesync run of the scenario (not in the medians)."""
        if self.args.phases and "sharesync" in self.args.pipelines:
            from bench import phases

            self.phases[scenario] = phases.instrumented(config, prepare, self.work / "logs" / f"{scenario}-phases.log",
                                                        self.server.pid)  # fmt: skip

    def shape(self, label: str, w: wl.Workload) -> None:
        table, base, profile = w.full_name, self.work / label, self.server.profile
        dv = w.deletion_vectors  # both other pipelines must ask for the delta response format
        if "bootstrap" in self.args.scenarios:
            log(f"{label}: bootstrap of {w.live_rows:,} rows (v{w.latest_version})")
            config, fresh_ss = sharesync_bootstrap(base, profile, table)
            peer_dir = base / "peer-boot"

            def fresh_peer() -> None:
                remove(peer_dir)
                peer_dir.mkdir(parents=True)

            sail_config, fresh_sail = sharesync_bootstrap(base, profile, table, embedded=True)
            jobs = {
                "sharesync": (sharesync_argv(config), fresh_ss, w.live_rows),
                "sail": (sharesync_argv(sail_config), fresh_sail, w.live_rows),
                "peer": (peer_argv(profile, table, peer_dir / "target", "bootstrap", delta_format=dv), fresh_peer,
                         w.live_rows),
                "limit": (limit_argv(profile, table, "snapshot", delta_format=dv), None, w.live_rows),
            }  # fmt: skip
            if not self.with_sail:
                del jobs["sail"]
            self.interleaved(f"{label}-bootstrap", jobs)
            self.verify(f"{label}-bootstrap", w, config.parent / "target", peer_dir / "target")
            if self.with_sail:
                verify(w, {"sail": sail_config.parent / "target"})
            self.breakdown(f"{label}-bootstrap", config, fresh_ss)

        if {"incremental", "warm", "noop"} & set(self.args.scenarios):
            log(f"{label}: incremental v{w.start_version + 1}..v{w.latest_version} "
                f"({w.versions} versions, {w.change_file_rows:,} change rows); setting up the start state …")  # fmt: skip
            state = start_state(
                base,
                w,
                profile,
                peer="peer" in self.args.pipelines,
                max_versions=self.args.max_versions,
                sail=self.with_sail,
            )
            if "incremental" in self.args.scenarios:
                changes = ("changes", "--from", str(w.start_version + 1), "--to", str(w.latest_version))
                jobs = {
                    "sharesync": (sharesync_argv(state.config), state.restore_sharesync, w.change_file_rows),
                    "peer": (peer_argv(profile, table, state.peer / "target", "incremental", delta_format=dv),
                             state.restore_peer,
                             w.change_file_rows),
                    "limit": (limit_argv(profile, table, *changes, delta_format=dv), None, w.change_file_rows),
                }  # fmt: skip
                if state.sail_config is not None:
                    jobs["sail"] = (sharesync_argv(state.sail_config), state.restore_sail, w.change_file_rows)
                self.interleaved(f"{label}-incremental", jobs)
                self.verify(f"{label}-incremental", w, state.sharesync / "target", state.peer / "target")
                if state.sail is not None:
                    verify(w, {"sail": state.sail / "target"})
                self.breakdown(f"{label}-incremental", state.config, state.restore_sharesync)
            if "warm" in self.args.scenarios and "sharesync" in self.args.pipelines:
                self.warm(label, w, state)
            if "noop" in self.args.scenarios:  # needs an up-to-date state
                run_child(sharesync_argv(state.config), log_to=self.work / "logs" / f"{label}-setup-noop.log")
                self.noop(label, state.config)

        if "history" in self.args.scenarios and "sharesync" in self.args.pipelines:
            from bench import history

            history.scenario(self, label, w)

    @property
    def with_sail(self) -> bool:
        """``--engine spark`` with the ``sail`` pipeline: sharesync on embedded Sail in the same runs."""
        return self.spark is not None and "sail" in self.args.pipelines

    def verify(self, scenario: str, w: wl.Workload, ss_target: Path, peer_target: Path) -> None:
        """sharesync's target must equal the provider (or the bench stops); a wrong peer target is
        reported as a finding instead, with its timings kept: the peer is not ours to fix."""
        verify(w, {"sharesync": ss_target} if "sharesync" in self.args.pipelines else {})
        if "peer" in self.args.pipelines and scenario in PEER_WRONG_BY_CONSTRUCTION:
            self.findings.append(f"- {scenario}: the peer's target is wrong by construction, not checked (time "
                                 f"reported, correctness not): {PEER_WRONG_BY_CONSTRUCTION[scenario]}")  # fmt: skip
            log(f"  {scenario}: sharesync's target verified; the peer's target is wrong by construction, not checked")
            return
        if "peer" in self.args.pipelines:
            try:
                verify(w, {"peer": peer_target})
            except SystemExit as wrong:
                self.findings.append(f"- {scenario}: the peer's target is WRONG: {wrong}")
                log(f"  {scenario}: {self.findings[-1][2:]}")
                return
        log(f"  {scenario}: targets verified (equal to the provider at v{w.latest_version}, {w.live_rows:,} rows)")

    def warm(self, label: str, w: wl.Workload, state: StartState) -> None:
        log(f"{label}: the incremental batch as the second pass of a running process")
        warmup, fresh_warmup = sharesync_bootstrap(self.work / label, self.server.profile, w.full_name)

        def fresh() -> None:
            state.restore_sharesync()
            fresh_warmup()

        argv = [PYTHON, "-m", "bench.probe", "warm", "--config", str(state.config), "--warmup", str(warmup)]
        for _ in range(self.runs):
            self.measure(f"{label}-warm", "probe", argv, before=fresh, rows=w.change_file_rows)
        verify(w, {"sharesync": state.sharesync / "target"})

    def noop(self, label: str, config: Path) -> None:
        log(f"{label}: no-op sync (nothing new)")
        for _ in range(max(self.runs, 5)):
            self.measure(f"{label}-noop", "sharesync", sharesync_argv(config))
        self.measure(f"{label}-noop", "probe", [PYTHON, "-m", "bench.probe", "noop", "--config", str(config)])

    def poll(self) -> None:
        wl.build_poll_tables(self.args.poll_tables, log=log)
        names = [f"poll.s.{wl.poll_table(i)}" for i in range(self.args.poll_tables)]
        config = write_config(self.work / "poll", self.server.profile, names)
        log(f"polling {len(names)} tables' versions")
        for _ in range(self.runs):
            self.measure(
                "poll", "probe", [PYTHON, "-m", "bench.probe", "poll", "--config", str(config), "--repeat", "2"]
            )

    # -- everything

    def run(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        workloads = {label: wl.build(wl.SHAPES[label].scaled(self.args.scale), self.args.seed, log=log)
                     for label in self.args.shape}  # fmt: skip
        poll_root = wl.build_poll_tables(self.args.poll_tables, log=log) if "poll" in self.args.scenarios else None
        root = serving_root(self.work, "root", {w.name: w.table_path for w in workloads.values()},
                            {"poll": poll_root / "poll"} if poll_root else None)  # fmt: skip
        self.server = Server(root, self.work, "main")
        log(f"sharing server pid {self.server.pid}: {json.loads(self.server.profile.read_text())['endpoint']}")
        if self.args.engine == "spark":
            global REMOTE
            log("starting the Apache Spark Connect server (deploy/spark/run.sh connect) …")
            try:
                self.spark = SparkServer(self.work, self.args.spark_conf)
            except BaseException:
                self.server.stop()
                raise
            REMOTE = self.spark.remote
            log(f"Spark Connect server pid {self.spark.pid}: {REMOTE}, {self.spark.rss_kib() / 1024:.0f} MiB")
        self.floor = rss_floor(self.work)
        log(f"RSS floor of the launcher (a /bin/true child): {self.floor:.1f} MiB")
        started = time.time()
        try:
            for label, w in workloads.items():
                self.shape(label, w)
            if "poll" in self.args.scenarios:
                self.poll()
        finally:
            self.server.stop()
            if self.spark is not None:
                self.spark.stop()
        self.report(workloads, time.time() - started)

    # -- results

    def summary(self) -> dict[str, dict]:
        out = {}
        for key, entry in self.results.items():
            runs = entry["runs"]
            med = {k: statistics.median(r.get(k, 0.0) for r in runs)
                   for k in ("wall", "maxrss_mib", "cpu", "server_cpu", "engine_rss_mib", "engine_cpu")}  # fmt: skip
            med["total_rss_mib"] = statistics.median(r["maxrss_mib"] + r.get("engine_rss_mib", 0.0) for r in runs)
            rows = entry.get("rows")
            out[key] = {**med, "n": len(runs), "rows": rows, "rows_per_s": rows / med["wall"] if rows else None}
            if entry["pipeline"] == "probe":
                outputs = [r["output"] for r in runs]
                out[key]["probe"] = outputs[-1]
                for field_ in ("first_call_seconds", "warm_call_seconds", "warm_pass_seconds", "warmup_seconds"):
                    values = [o.get(field_) for o in outputs if o.get(field_) is not None]
                    if values:
                        out[key][field_] = statistics.median(values)
            else:
                timings = [r["output"].get("timings") for r in runs if r["output"].get("timings")]
                if timings:
                    out[key]["timings"] = {k: statistics.median(t.get(k, 0.0) for t in timings) for k in timings[0]}
        return out

    def report(self, workloads: dict[str, wl.Workload], seconds: float) -> None:
        summary = self.summary()
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "sync", "pipelines", "state"],
                                    capture_output=True, text=True, cwd=REPO).stdout.strip())  # fmt: skip
        machine = f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
        header = {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit + ("+dirty" if dirty else ""),
            "machine": machine, "python": platform.python_version(), "runs": self.runs, "seconds": round(seconds),
            "scale": self.args.scale, "rss_floor_mib": round(self.floor, 1), "load_avg_end": os.getloadavg(),
            "workloads": {k: {**asdict(w), "root": str(w.root)} for k, w in workloads.items()},
        }  # fmt: skip
        goals = self.goals(summary, list(workloads))
        reduced = (f"REDUCED SCALE (--scale {self.args.scale}): rows and changed keys × {self.args.scale}; "
                   "the figures test the harness and are not comparable with full runs\n"
                   if self.args.scale != 1 else "")  # fmt: skip
        text = "\n".join([
            f"{reduced}sharesync benchmark — {header['date']}, commit {header['commit']}, {machine}, "
            f"median of {self.runs} run(s), {round(seconds)} s; RSS floor {self.floor:.0f} MiB; "
            f"1-min load average at the end {os.getloadavg()[0]:.1f}", "",
            *self.table(summary), "", *self.by_shape(summary, workloads), "", *self.spark_table(summary),
            *self.notes(summary, workloads),
            *self.findings, "", "Goals (issue 16):", *goals,
        ])  # fmt: skip
        print("\n" + text, flush=True)
        results = Path(self.args.results)
        results.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S") + (f"-scale{self.args.scale:g}" if self.args.scale != 1 else "")
        (results / f"{stamp}.json").write_text(json.dumps(
            {**header, "summary": summary, "raw": self.results, "phases": self.phases, "goals": goals,
             "findings": self.findings},
            indent=2, default=str))  # fmt: skip
        (results / f"{stamp}.md").write_text(text + "\n")
        log(f"results: {results / stamp}.json / .md")

    @staticmethod
    def table(summary: dict) -> list[str]:
        lines = ["| scenario | pipeline | wall s | peak RSS MiB | CPU s | server CPU s | rows/s | × peer wall | × peer RSS | × peer CPU | × limit wall |",
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for key, s in summary.items():
            scenario, pipeline = key.split("/")
            peer, limit = summary.get(f"{scenario}/peer"), summary.get(f"{scenario}/limit")
            if pipeline != "sharesync":
                peer = limit = None
            if pipeline == "peer" and scenario in PEER_WRONG_BY_CONSTRUCTION:
                pipeline = "peer (target wrong by construction)"
            rate = f"{s['rows_per_s']:,.0f}" if s.get("rows_per_s") else "–"
            lines.append(
                f"| {scenario} | {pipeline} | {s['wall']:.2f} | {s['maxrss_mib']:.0f} | {s['cpu']:.1f} | "
                f"{s['server_cpu']:.1f} | {rate} | {_ratio(s, peer, 'wall')} | {_ratio(s, peer, 'maxrss_mib')} | "
                f"{_ratio(s, peer, 'cpu')} | {_ratio(s, limit, 'wall')} |"
            )
        return lines

    def spark_table(self, summary: dict) -> list[str]:
        """--engine spark: sharesync on Spark vs the Spark peer (wall; memory = client + Spark server)
        and vs sharesync on embedded Sail (issue 29 §5's goals: ≤ 0.5× wall, ≤ 0.7× memory)."""
        if self.spark is None:
            return []
        lines = ["Apache Spark engine (memory = the client process's peak RSS + the Spark server's peak VmRSS "
                 "sampled during the run):", "",
                 "| scenario | sharesync on Spark s | client+Spark MiB | Spark peer s | client+Spark MiB | × peer wall "
                 "| × peer memory | sharesync on Sail s | Sail MiB | Spark / Sail wall |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        scenarios = dict.fromkeys(key.split("/")[0] for key in summary if key.endswith("/sharesync"))
        for scenario in scenarios:
            ss, peer, sail = (summary.get(f"{scenario}/{p}") for p in ("sharesync", "peer", "sail"))

            def cell(x: dict | None, field_: str, fmt: str = "{:.2f}") -> str:
                return fmt.format(x[field_]) if x else "–"

            lines.append(
                f"| {scenario} | {cell(ss, 'wall')} | {cell(ss, 'total_rss_mib', '{:,.0f}')} | {cell(peer, 'wall')} | "
                f"{cell(peer, 'total_rss_mib', '{:,.0f}')} | {_ratio(ss, peer, 'wall')} | "
                f"{_ratio(ss, peer, 'total_rss_mib')} | {cell(sail, 'wall')} | {cell(sail, 'maxrss_mib', '{:,.0f}')} | "
                f"{_ratio(ss, sail, 'wall')} |"
            )
        return [*lines, ""]

    @staticmethod
    def by_shape(summary: dict, workloads: dict[str, wl.Workload]) -> list[str]:
        """One line per shape: sharesync's ratios, the figures the goals are about."""

        def ratio(scenario: str, other: str, field_: str = "wall") -> str:
            return _ratio(summary.get(f"{scenario}/sharesync"), summary.get(f"{scenario}/{other}"), field_)

        def wall(key: str) -> str:
            return f"{summary[key]['wall']:.2f}" if key in summary else "–"

        lines = ["| shape | rows | bootstrap s | × peer wall | × peer RSS | incremental s | × peer wall | × peer RSS | × limit wall | no-op s |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for label, w in workloads.items():
            boot, inc = f"{label}-bootstrap", f"{label}-incremental"
            lines.append(
                f"| {label} | {w.rows:,} | {wall(f'{boot}/sharesync')} | {ratio(boot, 'peer')} | "
                f"{ratio(boot, 'peer', 'maxrss_mib')} | {wall(f'{inc}/sharesync')} | {ratio(inc, 'peer')} | "
                f"{ratio(inc, 'peer', 'maxrss_mib')} | {ratio(inc, 'limit')} | {wall(f'{label}-noop/sharesync')} |"
            )
        return lines

    def notes(self, summary: dict, workloads: dict[str, wl.Workload]) -> list[str]:
        extra = []
        for key, s in summary.items():
            p = s.get("probe")
            if p and key.endswith("noop/probe"):
                extra.append(f"- {key}: in-process `sync_all()` first call {s['first_call_seconds']:.3f} s, warm "
                             f"{s['warm_call_seconds']:.4f} s; engine imports {p['import_seconds']:.2f} s; "
                             f"outcomes {p['outcomes']}; Spark started: {p['engine_started']}, pysail imported: "
                             f"{p['pysail_imported']}")  # fmt: skip
            elif p and key.endswith("warm/probe"):
                cold = summary.get(key.replace("warm/probe", "incremental/sharesync"), {}).get("wall")
                versus = f" (a fresh process's pass: {cold:.2f} s)" if cold else ""
                extra.append(f"- {key}: the incremental batch as a running process's second pass (`sync --every`) "
                             f"{s['warm_pass_seconds']:.2f} s{versus}; its first pass, a bootstrap, "
                             f"{s['warmup_seconds']:.2f} s; peak RSS of the process {s['maxrss_mib']:.0f} MiB")  # fmt: skip
            elif p:
                extra.append(f"- {key}: `source_versions()` over {p['tables']} tables: first call "
                             f"{s['first_call_seconds']:.2f} s, warm {s['warm_call_seconds']:.2f} s, "
                             f"failed {p['failed']}; process {s['wall']:.2f} s")  # fmt: skip
            if s.get("timings"):
                extra.append(f"- {key} phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["timings"].items()))
        for scenario, run in self.phases.items():
            top = [f"{k} {v:.2f} s" for k, v in run["phases"].items() if v >= 0.05][:12]
            extra.append(f"- {scenario}/sharesync instrumented run ({run['maxrss_mib']:.0f} MiB): " + ", ".join(top))
            if run["missing"]:
                extra.append(f"  - not instrumented (no longer in the product): {', '.join(run['missing'])}")
        for label, w in workloads.items():
            extra.append(f"- {label} ({w.name}): {w.rows:,} rows in {w.base_commits} commits, then {w.versions} "
                         f"versions ({', '.join(f'{w.kinds.count(k)} {k}' for k in wl.KINDS)}) of "
                         f"~{w.change_rows:,} keys; {w.live_rows:,} rows at v{w.latest_version}; "
                         f"{w.change_file_rows:,} change rows in v{w.start_version + 1}..v{w.latest_version}")  # fmt: skip
        return extra

    def goals(self, summary: dict, labels: list[str]) -> list[str]:
        out: list[str] = []

        def get(key: str, field_: str = "wall") -> float | None:
            return summary.get(key, {}).get(field_)

        def ratio(a: float | None, b: float | None) -> float | None:
            return a / b if a is not None and b else None

        def check(name: str, value: float | None, bound: float, unit: str = "×") -> None:
            if value is None:
                out.append(f"- [----] {name}: not measured (goal ≤ {bound}{unit})")
            elif value <= bound:
                out.append(f"- [PASS] {name}: {value:.2f}{unit} (goal ≤ {bound}{unit})")
            else:
                out.append(f"- [MISS] {name}: {value:.2f}{unit} (goal ≤ {bound}{unit}; {value / bound - 1:.0%} over)")

        def versus(scenario: str, other: str, field_: str = "wall") -> float | None:
            return ratio(get(f"{scenario}/sharesync", field_), get(f"{scenario}/{other}", field_))

        ran = set(self.args.scenarios)
        if self.spark is not None:  # issue 29 §5: against the Spark user's own pipeline, on the same engine
            for label in labels:
                for scenario in ("bootstrap", "incremental"):
                    if scenario in ran:
                        key = f"{label}-{scenario}"
                        check(f"{key} on Spark: wall vs the Spark peer", versus(key, "peer"), 0.5)
                        check(f"{key} on Spark: client + Spark server memory vs the Spark peer's",
                              versus(key, "peer", "total_rss_mib"), 0.7)  # fmt: skip
            return out
        for label in labels:
            inc, boot = f"{label}-incremental", f"{label}-bootstrap"
            if "incremental" in ran:
                check(f"{inc}: wall vs peer", versus(inc, "peer"), 0.5)
                check(f"{inc}: peak RSS vs peer", versus(inc, "peer", "maxrss_mib"), 0.6)
            if "bootstrap" in ran:
                check(f"{boot}: wall vs peer", versus(boot, "peer"), 0.8)
            if "noop" in ran:
                check(f"{label}-noop: process wall", get(f"{label}-noop/sharesync"), 0.3, " s")
        if "small" in labels and "incremental" in ran:
            check(
                "small-incremental: a pass with changes (process wall)", get("small-incremental/sharesync"), 1.0, " s"
            )
        if "small" in labels and "warm" in ran:
            check(
                "small-warm: a pass with changes in a running `sync --every` process",
                get("small-warm/probe", "warm_pass_seconds"),
                1.0,
                " s",
            )
        if "dv" in labels and "incremental" in ran:  # issue 12's own bound: half the peer's memory too
            check("dv-incremental (issue 12): peak RSS vs peer", versus("dv-incremental", "peer", "maxrss_mib"), 0.5)
        if "M" in labels and "incremental" in ran:
            check("M-incremental: wall vs limit", versus("M-incremental", "limit"), 2.5)
        if "L" in labels and "M" in labels:
            for scenario in ("bootstrap", "incremental"):
                if scenario in ran:
                    check(f"peak RSS L/M ({scenario}, sharesync)",
                          ratio(get(f"L-{scenario}/sharesync", "maxrss_mib"), get(f"M-{scenario}/sharesync", "maxrss_mib")),
                          1.3)  # fmt: skip
        if "history" in ran:
            from bench import history

            for name, value, bound in history.goals(get, labels):
                check(name, value, bound)
        if "poll" in ran:
            check(
                f"poll {self.args.poll_tables:,} table versions (in-process, first call)",
                get("poll/probe", "first_call_seconds"),
                2.0,
                " s",
            )
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sharesync vs peer vs limit, per workload shape (issues 7, 16)")
    parser.add_argument("--shape", "--size", nargs="+", default=["all"], choices=[*wl.SHAPES, "all", "xl"],
                        help="workload shapes (default: all)")  # fmt: skip
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every shape's rows and changed keys")
    parser.add_argument("--quick", action="store_true", help="smoke run: --scale 0.1 and 1 run")
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--phases", action="store_true", help="also one instrumented sharesync run per scenario")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--poll-tables", type=int, default=1000)
    parser.add_argument(
        "--max-versions", type=int, default=None, help="sharesync max_versions_per_batch (default: config default)"
    )
    parser.add_argument("--work", default=os.environ.get("SHARESYNC_BENCH_WORK", "/tmp/sharesync-bench"),
                        help="scratch directory for targets, state and logs")  # fmt: skip
    parser.add_argument("--results", default=str(RESULTS), help="where the .json/.md results go")
    parser.add_argument("--rss-limit-gib", type=float, default=16.0, help="kill a child whose RSS exceeds this")
    parser.add_argument("--engine", choices=("sail", "spark"), default="sail",
                        help="sharesync's engine: embedded Sail, or one Apache Spark Connect server for the run "
                             "(deploy/spark/run.sh; the peer is then bench.spark_peer, and `sail` runs "
                             "sharesync on Sail beside it)")  # fmt: skip
    parser.add_argument("--spark-conf", action="append", default=[], metavar="K=V",
                        help="with --engine spark: a setting for the Spark server (deploy/spark/run.sh --conf), "
                             "e.g. spark.driver.memory=4g")  # fmt: skip
    args = parser.parse_args(argv)
    global RSS_LIMIT_KB
    RSS_LIMIT_KB = int(args.rss_limit_gib * 2**20)
    every = [s for s in wl.SHAPES if s not in wl.XL_SHAPES]  # the XL curve is asked for by name: --shape xl
    args.shape = every if "all" in args.shape else list(dict.fromkeys(args.shape))
    if "xl" in args.shape:
        args.shape = [s for s in args.shape if s != "xl"] + ["xl-1m", "xl-5m", "xl-20m"]
    if args.quick:
        args.scale = 0.1
        if "--runs" not in (argv if argv is not None else sys.argv[1:]):
            args.runs = 1
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
