"""The sharesync benchmark (issue 7): sharesync vs the peer pipeline vs the limit, same run.

    .venv/bin/python -m bench.run                 # M scenarios, 3 runs each
    .venv/bin/python -m bench.run --quick         # smoke run: 100 k rows, 8 versions, 1 run
    .venv/bin/python -m bench.run --size M L      # also L (5 M rows) for the RSS bound

One sharing server subprocess (``sharesync serve``, URL lifetime one day) serves every
generated table over loopback. Every measured step is a fresh child process; the harness
takes its wall time (monotonic clock around ``Popen`` … ``os.wait4``) and its peak RSS and CPU
time from ``wait4``'s rusage (the child's own ``ru_maxrss``: sharesync's embedded Sail engine
runs inside that process, so it is included). Runs are interleaved (the pipeline order
rotates per run) so load from elsewhere hits all of them alike; medians are reported.

Scenarios per size (``--size``):

* ``bootstrap``   — fresh target and state; sync the latest snapshot.
* ``incremental`` — from a target and checkpoint at the version before the change versions:
  set up once (unmeasured) through a second, short-lived server whose copy of the table
  stops at that version (same table id and files), then copied back before every run.
* ``noop``        — ``sharesync sync`` when nothing is new (process wall time), and the
  in-process ``SyncEngine.sync_all()`` call (``bench.probe noop``).
* ``poll``        — ``SyncEngine.source_versions()`` over 1,000 configured tables
  (``bench.probe poll``); measured once, not per size.

Results: a table on stdout, ``bench/results/<stamp>.json`` and ``.md`` (gitignored).
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
SIZES = {"M": 1_000_000, "L": 5_000_000}
PIPELINES = ("sharesync", "peer", "limit")
RSS_LIMIT_KB = 16 * 2**20  # a child above this is killed and the run stops (--rss-limit-gib)


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


def run_child(argv: list[str], *, log_to: Path, env: dict[str, str] | None = None, server_pid: int | None = None,
              check: bool = True) -> Measure:
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
    return Measure(usage["wall"], usage["maxrss_kb"] / 1024, usage["cpu"], _server_cpu(server_pid) - server_before,
                   load, output)


def rss_floor(work: Path) -> float:
    """Peak RSS the launcher reports for a do-nothing child (``/bin/true``): the measurement floor."""
    return run_child(["/bin/true"], log_to=work / "logs" / "floor.log").maxrss_mib


# ---------------------------------------------------------------- servers


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


# ---------------------------------------------------------------- pipelines


def write_config(directory: Path, profile: Path, tables: list[str], *, max_versions: int | None = None) -> Path:
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    config = {
        "profile": str(profile),
        "state_store": f"sqlite:///{directory / 'state.db'}",
        "staging_dir": str(directory / "staging"),
        "tables": [
            {"name": name, "target": str(directory / ("target" if len(tables) == 1 else f"target-{i}")),
             "keys": ["id"], "mode": "merge"}
            for i, name in enumerate(tables)
        ],
    }  # fmt: skip
    if max_versions is not None:
        config["defaults"] = {"max_versions_per_batch": max_versions}
    path = directory / "sharesync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def sharesync_argv(config: Path) -> list[str]:
    return [SHARESYNC, "--config", str(config), "sync"]


def peer_argv(profile: Path, table: str, target: Path, *args: str) -> list[str]:
    return [PYTHON, "-m", "bench.peer", "--profile", str(profile), "--table", table, "--target", str(target), *args]


def limit_argv(profile: Path, table: str, *args: str) -> list[str]:
    return [PYTHON, "-m", "bench.limit", "--profile", str(profile), "--table", table, *args]


def target_rows(path: Path) -> int:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).num_rows


def restore(seed: Path, directory: Path) -> None:
    shutil.rmtree(directory, ignore_errors=True)
    shutil.copytree(seed, directory, symlinks=True)


# ---------------------------------------------------------------- scenarios


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(args.work).resolve()
        self.runs = args.runs
        self.results: dict[str, dict] = {}
        self.notes: list[str] = []

    def measure(self, scenario: str, pipeline: str, argv: list[str], *, before=None, env=None,  # noqa: ANN001
                rows: int | None = None) -> None:
        key = f"{scenario}/{pipeline}"
        entry = self.results.setdefault(key, {"scenario": scenario, "pipeline": pipeline, "rows": rows, "runs": []})
        if before is not None:
            before()
        index = len(entry["runs"]) + 1
        m = run_child(argv, log_to=self.work / "logs" / f"{scenario}-{pipeline}-{index}.log", env=env,
                      server_pid=self.server.pid)
        entry["runs"].append(asdict(m))
        log(f"  {key:<32} run {index}: {m.wall:7.2f} s  {m.maxrss_mib:8.0f} MiB  cpu {m.cpu:6.1f} s"
            f"  server cpu {m.server_cpu:5.1f} s  load {m.load:4.1f}")

    def interleaved(self, scenario: str, jobs: dict[str, tuple]) -> None:
        """Each pipeline ``runs`` times, the order rotating per run."""
        names = [p for p in PIPELINES if p in jobs and p in self.args.pipelines]
        for run in range(self.runs):
            order = names[run % len(names):] + names[: run % len(names)] if names else []
            for name in order:
                argv, before, rows = jobs[name]
                self.measure(scenario, name, argv, before=before, rows=rows)

    # -- per size

    def size(self, label: str, w: wl.Workload) -> None:
        table = w.full_name
        base = self.work / label
        profile = self.server.profile
        if "bootstrap" in self.args.scenarios:
            log(f"{label}: bootstrap of {w.live_rows:,} rows (v{w.latest_version})")
            ss_dir, peer_dir = base / "ss-boot", base / "peer-boot"
            config = write_config(ss_dir, profile, [table])

            def fresh_ss() -> None:
                for p in (ss_dir / "target", ss_dir / "staging", ss_dir / "state.db"):
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)

            def fresh_peer() -> None:
                shutil.rmtree(peer_dir, ignore_errors=True)
                peer_dir.mkdir(parents=True)

            self.interleaved(f"{label}-bootstrap", {
                "sharesync": (sharesync_argv(config), fresh_ss, w.live_rows),
                "peer": (peer_argv(profile, table, peer_dir / "target", "bootstrap"), fresh_peer, w.live_rows),
                "limit": (limit_argv(profile, table, "snapshot"), None, w.live_rows),
            })  # fmt: skip
            self._check(f"{label}-bootstrap", ss_dir / "target", peer_dir / "target", w.live_rows)

        if "incremental" in self.args.scenarios or "noop" in self.args.scenarios:
            log(f"{label}: incremental v{w.start_version + 1}..v{w.latest_version} "
                f"({w.versions} versions, {w.change_file_rows:,} change rows); setting up the start state …")
            ss_dir, ss_seed = base / "ss-inc", base / "ss-inc-seed"
            peer_dir, peer_seed = base / "peer-inc", base / "peer-inc-seed"
            start_server = Server(serving_root(self.work, f"root-start-{label}", {w.name: wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name}), self.work, f"start-{label}")
            try:
                shutil.rmtree(ss_dir, ignore_errors=True)
                config = write_config(ss_dir, profile, [table], max_versions=self.args.max_versions)
                run_child(sharesync_argv(config), log_to=self.work / "logs" / f"{label}-setup-sharesync.log",
                          env={"SHARESYNC_PROFILE": str(start_server.profile)})
                shutil.rmtree(peer_dir, ignore_errors=True)
                peer_dir.mkdir(parents=True)
                run_child(peer_argv(start_server.profile, table, peer_dir / "target", "bootstrap"),
                          log_to=self.work / "logs" / f"{label}-setup-peer.log")
            finally:
                start_server.stop()
            start_rows = target_rows(ss_dir / "target")
            if start_rows != target_rows(peer_dir / "target"):
                raise SystemExit(f"{label}: the start states differ ({start_rows} rows)")
            restore(ss_dir, ss_seed)
            restore(peer_dir, peer_seed)
            if "incremental" in self.args.scenarios:
                self.interleaved(f"{label}-incremental", {
                    "sharesync": (sharesync_argv(config), lambda: restore(ss_seed, ss_dir), w.change_file_rows),
                    "peer": (peer_argv(profile, table, peer_dir / "target", "incremental"),
                             lambda: restore(peer_seed, peer_dir), w.change_file_rows),
                    "limit": (limit_argv(profile, table, "changes", "--from", str(w.start_version + 1),
                                         "--to", str(w.latest_version)), None, w.change_file_rows),
                })  # fmt: skip
                self._check(f"{label}-incremental", ss_dir / "target", peer_dir / "target", w.live_rows)
            else:  # the no-op needs an up-to-date state
                run_child(sharesync_argv(config), log_to=self.work / "logs" / f"{label}-setup-noop.log")
            if "noop" in self.args.scenarios:
                self.noop(label, config)

    def _check(self, scenario: str, ss_target: Path, peer_target: Path, expected: int) -> None:
        ran = {"sharesync": ss_target, "peer": peer_target}
        got = {name: target_rows(path) if path.exists() else None
               for name, path in ran.items() if name in self.args.pipelines}  # fmt: skip
        bad = {k: v for k, v in got.items() if v is not None and v != expected}
        if bad:
            raise SystemExit(f"{scenario}: wrong row counts {bad}, expected {expected}")
        log(f"  {scenario}: targets verified ({expected:,} rows)")

    def noop(self, label: str, config: Path) -> None:
        log(f"{label}: no-op sync (nothing new)")
        for _ in range(max(self.runs, 5)):
            self.measure(f"{label}-noop", "sharesync", sharesync_argv(config))
        self.measure(f"{label}-noop", "probe", [PYTHON, "-m", "bench.probe", "noop", "--config", str(config)])

    def poll(self) -> None:
        root = wl.build_poll_tables(self.args.poll_tables, log=log)
        names = [f"poll.s.{wl.poll_table(i)}" for i in range(self.args.poll_tables)]
        config = write_config(self.work / "poll", self.server.profile, names)
        log(f"polling {len(names)} tables' versions")
        for _ in range(self.runs):
            self.measure("poll", "probe", [PYTHON, "-m", "bench.probe", "poll", "--config", str(config), "--repeat", "2"])
        return root

    # -- everything

    def run(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        params = dict(versions=self.args.versions, change_rows=self.args.change_rows, seed=self.args.seed)
        workloads = {label: wl.build(rows=self.args.rows.get(label, SIZES.get(label)), **params, log=log)
                     for label in self.args.size}  # fmt: skip
        poll_root = wl.build_poll_tables(self.args.poll_tables, log=log) if "poll" in self.args.scenarios else None
        root = serving_root(self.work, "root", {w.name: w.table_path for w in workloads.values()},
                            {"poll": poll_root / "poll"} if poll_root else None)
        self.server = Server(root, self.work, "main")
        log(f"sharing server pid {self.server.pid}: {json.loads(self.server.profile.read_text())['endpoint']}")
        self.floor = rss_floor(self.work)
        log(f"RSS floor of the launcher (a /bin/true child): {self.floor:.1f} MiB")
        started = time.time()
        try:
            for label, w in workloads.items():
                self.size(label, w)
            if "poll" in self.args.scenarios:
                self.poll()
        finally:
            self.server.stop()
        self.report(workloads, time.time() - started)

    # -- results

    def summary(self) -> dict[str, dict]:
        out = {}
        for key, entry in self.results.items():
            runs = entry["runs"]
            med = {k: statistics.median(r[k] for r in runs) for k in ("wall", "maxrss_mib", "cpu", "server_cpu")}
            rows = entry.get("rows")
            out[key] = {**med, "n": len(runs), "rows": rows, "rows_per_s": rows / med["wall"] if rows else None}
            if entry["pipeline"] == "probe":
                outputs = [r["output"] for r in runs]
                out[key]["probe"] = outputs[-1]
                for field_ in ("first_call_seconds", "warm_call_seconds"):
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
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "sync", "pipelines", "state"],
                                    capture_output=True, text=True, cwd=REPO).stdout.strip())  # fmt: skip
        machine = f"{os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB"
        header = {
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit + ("+dirty" if dirty else ""),
            "machine": machine, "python": platform.python_version(), "runs": self.runs, "seconds": round(seconds),
            "rss_floor_mib": round(self.floor, 1), "load_avg_end": os.getloadavg(),
            "workloads": {k: {**asdict(w), "root": str(w.root)} for k, w in workloads.items()},
        }  # fmt: skip
        lines = self.table(summary, workloads)
        targets = self.targets(summary, workloads)
        quick = "QUICK SMOKE RUN (M = 100 k rows, L = 500 k, 8 versions of 5 k keys): not comparable with full runs\n" if self.args.quick else ""
        text = "\n".join([
            f"{quick}sharesync benchmark — {header['date']}, commit {header['commit']}, {machine}, "
            f"median of {self.runs} run(s), {round(seconds)} s; RSS floor {self.floor:.0f} MiB; "
            f"1-min load average at the end {os.getloadavg()[0]:.1f}", "", *lines, "", "Targets:", *targets,
        ])  # fmt: skip
        print("\n" + text, flush=True)
        RESULTS.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S") + ("-quick" if self.args.quick else "")
        (RESULTS / f"{stamp}.json").write_text(json.dumps(
            {**header, "summary": summary, "raw": self.results, "targets": targets}, indent=2, default=str))
        (RESULTS / f"{stamp}.md").write_text(text + "\n")
        log(f"results: {RESULTS / stamp}.json / .md")

    def table(self, summary: dict, workloads: dict) -> list[str]:
        lines = ["| scenario | pipeline | wall s | peak RSS MiB | CPU s | server CPU s | rows/s | × peer wall | × peer RSS | × peer CPU | × limit wall |",
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for key, s in summary.items():
            scenario, pipeline = key.split("/")
            peer = summary.get(f"{scenario}/peer")
            limit = summary.get(f"{scenario}/limit")
            ratio = lambda a, b: f"{a / b:.2f}" if b else "–"  # noqa: E731
            is_ss = pipeline == "sharesync"
            rate = f"{s['rows_per_s']:,.0f}" if s.get("rows_per_s") else "–"
            lines.append(
                f"| {scenario} | {pipeline} | {s['wall']:.2f} | {s['maxrss_mib']:.0f} | {s['cpu']:.1f} | "
                f"{s['server_cpu']:.1f} | {rate} | "
            )
            lines[-1] += (
                f"{ratio(s['wall'], peer['wall']) if is_ss and peer else '–'} | "
                f"{ratio(s['maxrss_mib'], peer['maxrss_mib']) if is_ss and peer else '–'} | "
                f"{ratio(s['cpu'], peer['cpu']) if is_ss and peer else '–'} | "
                f"{ratio(s['wall'], limit['wall']) if is_ss and limit else '–'} |"
            )
        extra = []
        for key, s in summary.items():
            if s.get("probe"):
                p = s["probe"]
                if key.endswith("noop/probe"):
                    extra.append(f"- {key}: in-process `sync_all()` first call {s['first_call_seconds']:.3f} s, warm "
                                 f"{s['warm_call_seconds']:.4f} s; engine imports {p['import_seconds']:.2f} s; "
                                 f"outcomes {p['outcomes']}; Spark started: {p['engine_started']}, pysail imported: "
                                 f"{p['pysail_imported']}")  # fmt: skip
                else:
                    extra.append(f"- {key}: `source_versions()` over {p['tables']} tables: first call "
                                 f"{s['first_call_seconds']:.2f} s, warm {s['warm_call_seconds']:.2f} s, "
                                 f"failed {p['failed']}; process {s['wall']:.2f} s")  # fmt: skip
            if s.get("timings"):
                extra.append(f"- {key} phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in s["timings"].items()))
        for label, w in workloads.items():
            extra.append(f"- {label}: {w.rows:,} rows in {w.base_commits} commits, then {w.versions} versions "
                         f"({', '.join(f'{w.kinds.count(k)} {k}' for k in wl.KINDS)}) of ~{w.change_rows:,} keys; "
                         f"{w.live_rows:,} rows at v{w.latest_version}; {w.change_file_rows:,} change rows in "
                         f"v{w.start_version + 1}..v{w.latest_version}")  # fmt: skip
        return lines + [""] + extra

    def targets(self, summary: dict, workloads: dict) -> list[str]:
        out = []

        def get(key: str, field_: str = "wall") -> float | None:
            return summary.get(key, {}).get(field_)

        def check(name: str, value: float | None, bound: float, unit: str = "×") -> None:
            if value is None:
                out.append(f"- {name}: not measured")
            else:
                out.append(f"- [{'PASS' if value <= bound else 'FAIL'}] {name}: {value:.2f}{unit} (≤ {bound}{unit})")

        def ratio(a: float | None, b: float | None) -> float | None:
            return a / b if a is not None and b else None

        for label in workloads:
            inc, boot = f"{label}-incremental", f"{label}-bootstrap"
            if label == "M" or self.args.quick:
                check(f"{inc} wall vs peer", ratio(get(f"{inc}/sharesync"), get(f"{inc}/peer")), 0.5)
                check(f"{inc} peak RSS vs peer", ratio(get(f"{inc}/sharesync", "maxrss_mib"), get(f"{inc}/peer", "maxrss_mib")), 0.5)
                check(f"{boot} wall vs peer", ratio(get(f"{boot}/sharesync"), get(f"{boot}/peer")), 1.0)
                check(f"{inc} wall vs limit", ratio(get(f"{inc}/sharesync"), get(f"{inc}/limit")), 2.0)
            check(f"{label}-noop process wall", get(f"{label}-noop/sharesync"), 0.3, " s")
        if "L" in workloads and "M" in workloads:
            for scenario in ("bootstrap", "incremental"):
                check(f"peak RSS L/M ({scenario}, sharesync)",
                      ratio(get(f"L-{scenario}/sharesync", "maxrss_mib"), get(f"M-{scenario}/sharesync", "maxrss_mib")), 1.3)
        check("poll 1,000 table versions (in-process, first call)", summary.get("poll/probe", {}).get("first_call_seconds"), 2.0, " s")
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sharesync vs peer vs limit (issue 7)")
    parser.add_argument("--size", nargs="+", default=["M"], choices=["M", "L"], help="table sizes (M=1M, L=5M rows)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: M=100k rows, 8 versions of 5k, 1 run")
    parser.add_argument("--scenarios", nargs="+", default=["bootstrap", "incremental", "noop", "poll"],
                        choices=["bootstrap", "incremental", "noop", "poll"])
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--versions", type=int, default=30)
    parser.add_argument("--change-rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--poll-tables", type=int, default=1000)
    parser.add_argument("--max-versions", type=int, default=None, help="sharesync max_versions_per_batch (default: config default)")
    parser.add_argument("--work", default=os.environ.get("SHARESYNC_BENCH_WORK", "/tmp/sharesync-bench"),
                        help="scratch directory for targets, state and logs")
    parser.add_argument("--rss-limit-gib", type=float, default=16.0, help="kill a child whose RSS exceeds this")
    args = parser.parse_args(argv)
    global RSS_LIMIT_KB
    RSS_LIMIT_KB = int(args.rss_limit_gib * 2**20)
    args.rows = {}
    if args.quick:
        args.rows = {"M": 100_000, "L": 500_000}
        args.versions, args.change_rows = 8, 5_000
        if "--runs" not in (argv if argv is not None else sys.argv[1:]):
            args.runs = 1
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
