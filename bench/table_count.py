"""Table-count benchmark (issue 34, "Scale with table count"): cost per pass as tables are added.

    .venv/bin/python -m bench.table_count                                  # N = 100 1000 3000, SQLite and PostgreSQL
    .venv/bin/python -m bench.table_count --tables 20 --runs 1             # harness check (~1 min)

N configured tables of ``--rows`` rows (1 k) each — one generated table (``bench.workload``, the
all-types schema, one change version) served under N names by one local server. For each N and
state store (``sqlite``; ``postgres``: a throwaway local cluster, loopback only, as the tests
start one) the harness measures, each as a child process from outside (``bench.run.run_child``:
wall, peak RSS, CPU):

* ``first`` — the first pass: a fresh state, every table bootstrapped (``--first-runs``, default 1);
* ``changed`` — a pass where ``--changed`` (50) tables have one new version (median of ``--runs``,
  the start state restored before each run: the state store and those tables' targets);
* ``noop`` — then a pass with nothing new (median of ``--runs``);
* ``peer-loop`` — the peer (``bench.peer``) over those tables, one process per table, as a user's
  loop would (``--peer-runs``; measured with the first N and store only: it depends on neither).

The first pass runs against a second server whose tables all stop at the start version; its result
is the start state. The changed and no-op passes read the main server, where the first ``--changed``
names are the table with its change version. Every
changed target is checked against the provider afterwards. Results: stdout and
``<results>/table-count-*.json/.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from bench import run as br
from bench import workload as wl

STORES = ("sqlite", "postgres")
GOALS = {"noop_1000_seconds": 2.0, "changed_over_peer": 0.15}  # issue 34


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="table-count benchmark: N configured tables, one server")
    parser.add_argument("--tables", type=int, nargs="+", default=[100, 1000, 3000], help="values of N")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--runs", type=int, default=3, help="runs of the no-op, changed and peer-loop passes")
    parser.add_argument("--first-runs", type=int, default=1, help="runs of the first (all-bootstrap) pass")
    parser.add_argument("--changed", type=int, default=50, help="tables with a new version in the changed pass")
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--peer-runs", type=int, default=3, help="runs of the peer loop (0: skip it)")
    parser.add_argument("--work", default=os.environ.get("SHARESYNC_BENCH_WORK", "/tmp/sharesync-bench") + "-count")
    parser.add_argument("--results", default=str(br.RESULTS))
    args = parser.parse_args(argv)
    if min(args.tables) < 1 or args.changed < 1:
        parser.error("--tables and --changed must be at least 1")
    args.changed = min(args.changed, min(args.tables))
    return args


def table_names(count: int) -> list[str]:
    """The configured names: ``t0000`` … (the first ``changed`` of them change)."""
    return [f"t{i:04d}" for i in range(count)]


def config_dict(directory: Path, profile: Path, names: list[str], state_store: str) -> dict[str, object]:
    """A sharesync config syncing every name in merge mode into ``directory/target-<i>``."""
    return {
        "profile": str(profile),
        "state_store": state_store,
        "staging_dir": str(directory / "staging"),
        "tables": [{"name": f"{wl.SHARE}.{wl.SCHEMA}.{name}", "target": str(directory / f"target-{i}"),
                    "keys": ["id"], "mode": "merge"} for i, name in enumerate(names)],
    }  # fmt: skip


def workload(args: argparse.Namespace) -> wl.Workload:
    shape = dataclasses.replace(
        wl.SHAPES["small"], name="count", rows=args.rows, versions=1, change_rows=max(10, args.rows // 20)
    )
    return wl.build(shape, args.seed, log=br.log)


# ---------------------------------------------------------------- state stores


class Store:
    """One state store kind: its URL for a run directory, and copying a seed state back."""

    def __init__(self, kind: str, pg_url: str | None) -> None:
        self.kind, self.pg_url = kind, pg_url

    def url(self, directory: Path, label: str) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{directory / 'state.db'}"
        assert self.pg_url is not None
        return f"{self.pg_url}/{label}"

    def snapshot(self, directory: Path, label: str) -> None:
        """Keep the current state as the seed (SQLite: a copy; PostgreSQL: a template database)."""
        if self.kind == "sqlite":  # through SQLite: a pass leaves its last commits in the WAL file
            _sqlite_copy(directory / "state.db", directory / "state.seed.db")
        else:
            self._sql(f'DROP DATABASE IF EXISTS "{label}_seed"', f'CREATE DATABASE "{label}_seed" TEMPLATE "{label}"')

    def restore(self, directory: Path, label: str) -> None:
        if self.kind == "sqlite":
            self.fresh(directory, label)
            _sqlite_copy(directory / "state.seed.db", directory / "state.db")
        else:
            self._sql(
                f'DROP DATABASE IF EXISTS "{label}" WITH (FORCE)', f'CREATE DATABASE "{label}" TEMPLATE "{label}_seed"'
            )

    def fresh(self, directory: Path, label: str) -> None:
        if self.kind == "sqlite":
            for suffix in ("", "-wal", "-shm"):
                (directory / f"state.db{suffix}").unlink(missing_ok=True)
        else:
            self._sql(f'DROP DATABASE IF EXISTS "{label}" WITH (FORCE)', f'CREATE DATABASE "{label}"')

    def _sql(self, *statements: str) -> None:
        import psycopg

        assert self.pg_url is not None
        with psycopg.connect(f"{self.pg_url.replace('+psycopg', '')}/postgres", autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())


def _sqlite_copy(source: Path, dest: Path) -> None:
    import sqlite3

    with sqlite3.connect(source) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)


@contextmanager
def postgres(wanted: bool) -> Iterator[str | None]:
    """A throwaway local cluster (``tests/support/pg_server``) on 127.0.0.1: its URL without a database."""
    if not wanted:
        yield None
        return
    from tests.support.pg_server import Cluster, bindir_or_unavailable

    cluster = Cluster(bindir_or_unavailable())
    url = cluster.create()
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{url.port}"
    finally:
        cluster.remove()


# ---------------------------------------------------------------- one N, one store


def bench_count(count: int, store: Store, args: argparse.Namespace, ctx: dict[str, object]) -> dict[str, object]:
    """The first, no-op and changed passes over ``count`` tables with one store."""
    w, main, start = ctx["workload"], ctx["main"], ctx["start"]
    assert isinstance(w, wl.Workload) and isinstance(main, br.Server) and isinstance(start, br.Server)
    work, label = Path(args.work), f"n{count}_{store.kind}"
    directory = work / label
    br.remove(directory)
    directory.mkdir(parents=True)
    config = directory / "sharesync.yaml"
    names = table_names(count)
    config.write_text(yaml.safe_dump(config_dict(directory, main.profile, names, store.url(directory, label)),
                                     sort_keys=False))  # fmt: skip
    at_start = {"SHARESYNC_PROFILE": str(start.profile)}
    argv = br.sharesync_argv(config)
    changed = [directory / f"target-{i}" for i in range(args.changed)]
    seeds = work / f"{label}-seed-targets"

    def fresh() -> None:
        br.remove(*directory.glob("target-*"), directory / "staging")
        store.fresh(directory, label)

    def restore_changed() -> None:
        store.restore(directory, label)
        for target in changed:
            br.restore(seeds / target.name, target)

    results: dict[str, dict[str, object]] = {}
    br.log(f"{count} tables, {store.kind}: first pass ×{args.first_runs} …")
    results |= _measure({"first": (argv, fresh)}, args.first_runs, work, label, at_start, main.pid)
    store.snapshot(directory, label)
    br.remove(seeds)
    for target in changed:
        shutil.copytree(target, seeds / target.name, symlinks=True)
    results |= _measure_jobs({"changed": (argv, restore_changed, {})}, args.runs, work, label, main.pid)
    # Then nothing is new: the last changed pass's checkpoints describe its targets. (Before it, the
    # 50 targets copied back would be newer than their checkpoints and rightly get a closer look.)
    results |= _measure_jobs({"noop": (argv, lambda: None, {})}, args.runs, work, label, main.pid)
    peer = ctx.pop("peer", None)
    if isinstance(peer, tuple):
        results |= _measure_jobs({"peer-loop": peer}, args.peer_runs, work, label, main.pid)
    br.verify(w, {f"{label} changed table {i}": t for i, t in enumerate(changed)})
    br.log(f"  {args.changed} changed targets equal the provider at v{w.latest_version}")
    return {"tables": count, "store": store.kind, "results": results}


def _measure(jobs: dict[str, tuple[list[str], Callable[[], None]]], runs: int, work: Path, label: str,
             env: dict[str, str], server_pid: int) -> dict[str, dict[str, object]]:  # fmt: skip
    return _measure_jobs({k: (a, b, env) for k, (a, b) in jobs.items()}, runs, work, label, server_pid)


def _measure_jobs(jobs: dict[str, tuple[list[str], Callable[[], None], dict[str, str]]], runs: int, work: Path,
                  label: str, server_pid: int) -> dict[str, dict[str, object]]:  # fmt: skip
    """Each job ``runs`` times, order rotating per run; medians and every run's figures."""
    raw: dict[str, list[br.Measure]] = {name: [] for name in jobs}
    names = list(jobs)
    for run in range(runs):
        for name in names[run % len(names) :] + names[: run % len(names)]:
            argv, before, env = jobs[name]
            before()
            m = br.run_child(argv, log_to=work / "logs" / f"{label}-{name}-{run + 1}.log", env=env,
                             server_pid=server_pid)  # fmt: skip
            raw[name].append(m)
            br.log(f"  {label} {name:<10} run {run + 1}: {m.wall:7.2f} s  {m.maxrss_mib:6.0f} MiB  "
                   f"cpu {m.cpu:6.1f} s  load {m.load:4.1f}")  # fmt: skip
    return {name: summarise(ms) for name, ms in raw.items()}


def summarise(ms: list[br.Measure]) -> dict[str, object]:
    import statistics

    fields = ("wall", "maxrss_mib", "cpu", "server_cpu", "load")
    return {"n": len(ms), **{f: statistics.median(getattr(m, f) for m in ms) for f in fields},
            "walls": [round(m.wall, 2) for m in ms]}  # fmt: skip


# ---------------------------------------------------------------- peer and report


def setup_peer(w: wl.Workload, names: list[str], start: br.Server, main: br.Server, work: Path) -> tuple[
        list[str], Callable[[], None], dict[str, str]]:  # fmt: skip
    """The peer's targets at the start version (through ``start``), and its loop job against ``main``."""
    targets, seed = work / "peer", work / f"peer-seed-{len(names)}"
    full = [f"{wl.SHARE}.{wl.SCHEMA}.{n}" for n in names]
    if not (seed / "complete").is_file():  # kept between invocations: 50 bootstraps take minutes
        br.remove(targets, seed)
        targets.mkdir(parents=True)
        for i, table in enumerate(full):
            br.run_child(br.peer_argv(start.profile, table, targets / f"target-{i}", "bootstrap"),
                         log_to=work / "logs" / "setup-peer.log")  # fmt: skip
        shutil.copytree(targets, seed, symlinks=True)
        (seed / "complete").touch()
    argv = [br.PYTHON, "-m", "bench.scale", "peer-loop", "--profile", str(main.profile), "--targets", str(targets),
            *full]  # fmt: skip
    return argv, lambda: br.restore(seed, targets), {}


def report(results: list[dict[str, object]], args: argparse.Namespace, w: wl.Workload) -> str:
    peer = next((r["results"]["peer-loop"] for r in results if "peer-loop" in r["results"]), None)  # type: ignore[index, operator]
    head = ("| tables | store | first pass s | no-op s | changed s | peer over changed s | changed / peer | "
            "peak RSS MiB (first / no-op / changed) |")  # fmt: skip
    lines = [
        f"table-count benchmark, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}; {w.rows:,}-row tables, {args.changed} changed; medians of {args.runs} "
        f"(first pass: {args.first_runs})", "", head, "|---" * (head.count("|") - 1) + "|",
    ]  # fmt: skip
    for r in results:
        res = r["results"]
        assert isinstance(res, dict)
        first, noop, changed = res["first"], res["noop"], res["changed"]
        ratio = f"{changed['wall'] / peer['wall']:.2f}×" if peer else "–"
        peer_wall = f"{peer['wall']:.2f}" if peer else "–"
        lines.append(f"| {r['tables']:,} | {r['store']} | {first['wall']:.2f} | {noop['wall']:.2f} | "
                     f"{changed['wall']:.2f} | {peer_wall} | {ratio} | {first['maxrss_mib']:.0f} / "
                     f"{noop['maxrss_mib']:.0f} / {changed['maxrss_mib']:.0f} |")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = Path(args.work).resolve()
    args.work = str(work)
    work.mkdir(parents=True, exist_ok=True)
    w = workload(args)
    names = table_names(max(args.tables))
    start_table = wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name
    main_root = br.serving_root(work, "root", {n: (w.table_path if i < args.changed else start_table)
                                               for i, n in enumerate(names)})  # fmt: skip
    start_root = br.serving_root(work, "root-start", {n: start_table for n in names})
    results: list[dict[str, object]] = []
    with postgres("postgres" in args.stores) as pg_url:
        main_server, start_server = br.Server(main_root, work, "main"), br.Server(start_root, work, "start")
        try:
            ctx: dict[str, object] = {"workload": w, "main": main_server, "start": start_server}
            if args.peer_runs > 0:
                ctx["peer"] = setup_peer(w, names[: args.changed], start_server, main_server, work)
            for count in args.tables:
                for kind in args.stores:
                    results.append(bench_count(count, Store(kind, pg_url), args, ctx))
        finally:
            main_server.stop()
            start_server.stop()
    text = report(results, args, w)
    print("\n" + text, flush=True)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    stamp = f"table-count-{time.strftime('%Y%m%d-%H%M%S')}"
    (out / f"{stamp}.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=2, default=str))
    (out / f"{stamp}.md").write_text(text + "\n")
    br.log(f"results: {out / stamp}.json / .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
