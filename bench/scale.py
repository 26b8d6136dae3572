"""Scale-out benchmark (issue 15): many tables in one pass, and a distributed engine.

    .venv/bin/python -m bench.scale tables                 # 50 tables: parallel vs --parallel 1 vs the peer loop
    .venv/bin/python -m bench.scale engines                # L incremental: embedded vs Sail local-cluster, 1 and 2 workers
    .venv/bin/python -m bench.scale tables --tables 4 --scale 0.1 --runs 1            # harness check
    .venv/bin/python -m bench.scale engines --shape small --scale 0.05 --runs 1       # harness check

``tables``: ``--tables`` tables (default 50) of ``--rows`` rows (10 k) with ``--versions`` change
versions (5) each — one generated table (``bench.workload``, the all-types schema), served under
50 names. Every pipeline starts from all tables synced to the version before the changes and
syncs them all: one ``sharesync sync`` pass (``--parallel``, default: the config default), the
same pass with ``--parallel 1``, the peer pipeline (``bench.peer``) looping over the tables, one
process per table as a user's loop would; and, for the memory goal, a ``sharesync sync`` of one
of the tables alone. ``engines``: the incremental scenario of one shape (L by default) with the
embedded engine and with a ``sail spark server`` in ``local-cluster`` mode with 1 and 2 workers
(its own process: its CPU and peak RSS are reported next to sharesync's). Every measured step is
a child process measured from outside (``bench.run.run_child``: wall, peak RSS, CPU); every
target is checked against the provider afterwards. Results: stdout, ``<results>/scale-*.json/.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from bench import run as br
from bench import workload as wl

GOALS = {  # issue 15: the parallel pass against the serial pass, the peer loop, and one table alone
    "wall parallel / serial": ("parallel", "serial", "wall", 0.5),
    "wall parallel / peer loop": ("parallel", "peer-loop", "wall", 0.15),
    "peak RSS parallel / one table": ("parallel", "one-table", "maxrss_mib", 1.5),
}


# ---------------------------------------------------------------- many tables


def tables_workload(args: argparse.Namespace) -> wl.Workload:
    shape = dataclasses.replace(
        wl.SHAPES["small"], name="many", rows=args.rows, versions=args.versions, change_rows=max(10, args.rows // 20)
    )
    return wl.build(shape.scaled(args.scale), args.seed, log=br.log)


def _names(w: wl.Workload, count: int) -> list[str]:
    return [f"{w.name}_t{i:03d}" for i in range(count)]


def _full(names: list[str]) -> list[str]:
    return [f"{wl.SHARE}.{wl.SCHEMA}.{name}" for name in names]


def _setup_tables(base: Path, w: wl.Workload, names: list[str], profile: Path) -> dict[str, Path]:
    """Every pipeline's directory at the start version (synced through a server that stops there), and seeds."""
    start_root = br.serving_root(
        base, "root-start", {n: wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name for n in names}
    )
    dirs = {"ss": base / "ss", "one": base / "ss-one", "peer": base / "peer"}
    br.remove(*dirs.values())
    br.write_config(dirs["ss"], profile, _full(names))
    br.write_config(dirs["one"], profile, _full(names[:1]))
    dirs["peer"].mkdir(parents=True)
    server = br.Server(start_root, base, "start")
    try:
        env = {"SHARESYNC_PROFILE": str(server.profile)}
        for key in ("ss", "one"):
            br.run_child(
                br.sharesync_argv(dirs[key] / "sharesync.yaml"), log_to=base / "logs" / f"setup-{key}.log", env=env
            )
        for i, table in enumerate(_full(names)):
            br.run_child(br.peer_argv(server.profile, table, dirs["peer"] / f"target-{i}", "bootstrap"),
                         log_to=base / "logs" / "setup-peer.log")  # fmt: skip
    finally:
        server.stop()
    for directory in dirs.values():
        br.restore(directory, directory.with_name(directory.name + "-seed"))
    return dirs


def _peer_loop_argv(profile: Path, names: list[str], targets: Path) -> list[str]:
    return [br.PYTHON, "-m", "bench.scale", "peer-loop", "--profile", str(profile), "--targets", str(targets),
            *_full(names)]  # fmt: skip


def peer_loop(profile: Path, targets: Path, tables: list[str]) -> int:
    """What a user's loop does: the peer pipeline once per table, one process each."""
    for i, table in enumerate(tables):
        argv = br.peer_argv(profile, table, targets / f"target-{i}", "incremental")
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    print(json.dumps({"pipeline": "peer-loop", "tables": len(tables)}))
    return 0


def bench_tables(args: argparse.Namespace, work: Path) -> dict[str, object]:
    w = tables_workload(args)
    names = _names(w, args.tables)
    root = br.serving_root(work, "root", {n: w.table_path for n in names})
    server = br.Server(root, work, "main")
    try:
        br.log(f"{len(names)} tables × {w.rows:,} rows, {w.versions} change versions; setting up the start state …")
        dirs = _setup_tables(work, w, names, server.profile)
        parallel = ["--parallel", str(args.parallel)] if args.parallel else []
        config, one = dirs["ss"] / "sharesync.yaml", dirs["one"] / "sharesync.yaml"

        def restore(key: str) -> Callable[[], None]:
            return lambda: br.restore(dirs[key].with_name(dirs[key].name + "-seed"), dirs[key])

        jobs = {
            "parallel": ([*br.sharesync_argv(config), *parallel], restore("ss")),
            "serial": ([*br.sharesync_argv(config), "--parallel", "1"], restore("ss")),
            "peer-loop": (_peer_loop_argv(server.profile, names, dirs["peer"]), restore("peer")),
            "one-table": (br.sharesync_argv(one), restore("one")),
        }
        results = measure_interleaved(jobs, args.runs, work, server.pid)
        check_targets(w, jobs, dirs, len(names))
    finally:
        server.stop()
    return {"scenario": "tables", "tables": len(names), "workload": _describe(w), "results": results,
            "goals": goals(results)}  # fmt: skip


def check_targets(w: wl.Workload, jobs: dict[str, tuple[list[str], Callable[[], None]]], dirs: dict[str, Path],
                  count: int) -> None:  # fmt: skip
    """Run each pipeline once more, unmeasured, and check every target it wrote against the provider."""
    for pipeline, key in (("parallel", "ss"), ("serial", "ss"), ("peer-loop", "peer")):
        argv, before = jobs[pipeline]
        before()
        br.run_child(argv, log_to=dirs[key].parent / "logs" / f"verify-{pipeline}.log")
        br.verify(w, {f"{pipeline} table {i}": dirs[key] / f"target-{i}" for i in range(count)})
        br.log(f"  {pipeline}: all {count} targets equal the provider at v{w.latest_version}")


# ---------------------------------------------------------------- engines


class SailProcess:
    """``sail spark server`` in its own process (``local-cluster`` mode with ``workers`` workers)."""

    def __init__(self, workers: int, log_file: Path) -> None:
        env = {**os.environ, "RUST_LOG": "warn,sail_cli=info", "SAIL_MODE": "local-cluster",
               "SAIL_CLUSTER__WORKER_INITIAL_COUNT": str(workers)}  # fmt: skip
        self.log_file = log_file
        sail = str(Path(sys.executable).with_name("sail"))
        self.process = subprocess.Popen([sail, "spark", "server", "--port", "0"], env=env,
                                        stdout=subprocess.DEVNULL, stderr=open(log_file, "w"))  # fmt: skip
        deadline = time.monotonic() + 60
        while (match := re.search(r"Spark Connect server on [\d.]+:(\d+)", log_file.read_text())) is None:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the Sail server did not start:\n{log_file.read_text()}")
            time.sleep(0.05)
        self.url = f"sc://127.0.0.1:{match.group(1)}"
        time.sleep(0.2)

    def peak_rss_mib(self) -> float:
        """The engine process's peak RSS so far (``VmHWM``)."""
        match = re.search(r"VmHWM:\s+(\d+)", Path(f"/proc/{self.process.pid}/status").read_text())
        return int(match.group(1)) / 1024 if match else 0.0

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def bench_engines(args: argparse.Namespace, work: Path) -> dict[str, object]:
    w = wl.build(wl.SHAPES[args.shape].scaled(args.scale), args.seed, log=br.log)
    root = br.serving_root(work, "root", {w.name: w.table_path})
    server = br.Server(root, work, "main")
    results: dict[str, dict[str, object]] = {}
    try:
        br.log(f"{args.shape} incremental ({w.change_file_rows:,} change rows); setting up the start state …")
        state = br.start_state(work, w, server.profile, peer=False)
        for variant in ("embedded", *(f"local-cluster-{n}" for n in args.workers)):
            engine = (
                None if variant == "embedded" else SailProcess(int(variant.rsplit("-", 1)[1]), work / f"{variant}.log")
            )
            try:
                config = _variant_config(state.config, work / f"{variant}.yaml", engine.url if engine else None)
                jobs = {variant: (br.sharesync_argv(config), state.restore_sharesync)}
                cpu_before = br._server_cpu(engine.process.pid) if engine else 0.0
                results |= measure_interleaved(jobs, args.runs, work, server.pid)
                if engine:
                    results[variant]["engine_cpu"] = br._server_cpu(engine.process.pid) - cpu_before
                    results[variant]["engine_peak_rss_mib"] = engine.peak_rss_mib()
                br.verify(w, {variant: state.sharesync / "target"})
                br.log(f"  {variant}: target equals the provider at v{w.latest_version}")
            finally:
                if engine:
                    engine.stop()
    finally:
        server.stop()
    return {"scenario": "engines", "workload": _describe(w), "results": results}


def _variant_config(base: Path, path: Path, remote: str | None) -> Path:
    raw = yaml.safe_load(base.read_text())
    if remote:
        raw["spark"] = {"remote": remote}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


# ---------------------------------------------------------------- measuring and reporting


def measure_interleaved(jobs: dict[str, tuple[list[str], Callable[[], None]]], runs: int, work: Path,
                        server_pid: int) -> dict[str, dict[str, object]]:  # fmt: skip
    """Each job ``runs`` times, the order rotating per run; medians of wall, peak RSS and CPU."""
    raw: dict[str, list[br.Measure]] = {name: [] for name in jobs}
    names = list(jobs)
    for run in range(runs):
        for name in names[run % len(names) :] + names[: run % len(names)]:
            argv, before = jobs[name]
            before()
            m = br.run_child(argv, log_to=work / "logs" / f"{name}-{run + 1}.log", server_pid=server_pid)
            raw[name].append(m)
            br.log(f"  {name:<24} run {run + 1}: {m.wall:7.2f} s  {m.maxrss_mib:7.0f} MiB  cpu {m.cpu:6.1f} s  "
                   f"load {m.load:4.1f}")  # fmt: skip
    return {name: {"n": len(ms), **{f: statistics.median(getattr(m, f) for m in ms)
                                    for f in ("wall", "maxrss_mib", "cpu", "server_cpu")}}
            for name, ms in raw.items()}  # fmt: skip


def goals(results: dict[str, dict[str, object]]) -> list[str]:
    out = []
    for name, (mine, other, field_, bound) in GOALS.items():
        a, b = results.get(mine, {}).get(field_), results.get(other, {}).get(field_)
        if not isinstance(a, float) or not isinstance(b, float) or not b:
            out.append(f"- [----] {name}: not measured (goal ≤ {bound}×)")
            continue
        ratio = a / b
        verdict = "PASS" if ratio <= bound else "MISS"
        out.append(f"- [{verdict}] {name}: {ratio:.2f}× (goal ≤ {bound}×)")
    return out


def _describe(w: wl.Workload) -> dict[str, object]:
    return {"table": w.name, "rows": w.rows, "versions": w.versions, "change_file_rows": w.change_file_rows}


def report(result: dict[str, object], args: argparse.Namespace) -> str:
    results = result["results"]
    assert isinstance(results, dict)
    extra = any("engine_cpu" in r for r in results.values())
    head = "| pipeline | wall s | peak RSS MiB | CPU s | server CPU s |" + (
        " engine CPU s | engine peak RSS MiB |" if extra else ""
    )
    reduced = f"REDUCED SCALE (--scale {args.scale:g}): not comparable with full runs" if args.scale != 1 else ""
    lines = [
        reduced,
        f"scale-out benchmark ({result['scenario']}), {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, "
        f"median of {args.runs} run(s), load {os.getloadavg()[0]:.1f}: {json.dumps(result['workload'])}",
        "", head, "|---" * (head.count("|") - 1) + "|",
    ]  # fmt: skip
    for name, r in results.items():
        row = f"| {name} | {r['wall']:.2f} | {r['maxrss_mib']:.0f} | {r['cpu']:.1f} | {r['server_cpu']:.1f} |"
        if extra:
            row += (
                f" {r.get('engine_cpu', 0.0):.1f} | {r.get('engine_peak_rss_mib', 0.0):.0f} |"
                if "engine_cpu" in r
                else " – | – |"
            )
        lines.append(row)
    if result.get("goals"):
        lines += ["", "Goals (issue 15):", *result["goals"]]  # type: ignore[misc]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="scale-out benchmark: many tables at once; a distributed engine")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("tables", "engines"):
        p = sub.add_parser(name)
        p.add_argument("--runs", type=int, default=3)
        p.add_argument("--scale", type=float, default=1.0, help="multiply rows and changed keys (smoke runs)")
        p.add_argument("--seed", type=int, default=7)
        p.add_argument("--work", default=os.environ.get("SHARESYNC_BENCH_WORK", "/tmp/sharesync-bench") + f"-{name}")
        p.add_argument("--results", default=str(br.RESULTS))
    tables, engines = sub.choices["tables"], sub.choices["engines"]
    tables.add_argument("--tables", type=int, default=50)
    tables.add_argument("--rows", type=int, default=10_000)
    tables.add_argument("--versions", type=int, default=5)
    tables.add_argument("--parallel", type=int, default=None, help="sharesync sync --parallel (default: config's)")
    engines.add_argument("--shape", default="L", choices=list(wl.SHAPES))
    engines.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    loop = sub.add_parser("peer-loop", help="(internal) the peer pipeline over several tables, in turn")
    loop.add_argument("--profile", type=Path, required=True)
    loop.add_argument("--targets", type=Path, required=True)
    loop.add_argument("tables", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "peer-loop":
        return peer_loop(args.profile, args.targets, args.tables)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    result = bench_tables(args, work) if args.command == "tables" else bench_engines(args, work)
    text = report(result, args)
    print("\n" + text, flush=True)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    stamp = f"scale-{args.command}-{time.strftime('%Y%m%d-%H%M%S')}" + (
        f"-scale{args.scale:g}" if args.scale != 1 else ""
    )
    (results / f"{stamp}.json").write_text(json.dumps(result, indent=2, default=str))
    (results / f"{stamp}.md").write_text(text + "\n")
    br.log(f"results: {results / stamp}.json / .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
