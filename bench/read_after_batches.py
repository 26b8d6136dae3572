"""Issue 42: does a target stay fast to read after many small batches? Reads after 200 batches vs freshly compacted.

    .venv/bin/python -m bench.read_after_batches                     # 2 M rows, 200 batches of 1 k random updates
    .venv/bin/python -m bench.read_after_batches --scale 0.01 --batches 20 --runs 1   # harness check

A provider table of ``--rows`` rows (the size curve's columns) gets ``--batches`` versions, each
new values for ``--keys`` keys scattered over the whole table (``xl-…-random-updates``: the
pattern that spreads deletion vectors over every file). sharesync starts from a target at the
version before them and syncs them one version per batch (``max_versions_per_batch: 1``), as a
``sync --every`` following a busy provider would: once with ``maintenance.compact: auto`` (the
default), once with ``off``. Each target is then read whole (every column of every live row,
``deltalake``'s QueryBuilder — the reader of the configuration docs — in a child process),
``--runs`` times interleaved with the same target after ``sharesync optimize --force``. The goal:
the maintained target reads in ≤ 1.2× the compacted one's time. Every target is checked against
the provider. Results: stdout and ``<results>/read-*.json/.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path

import yaml

from bench import workload as wl
from bench.commands import restore
from bench.measure import PYTHON, SHARESYNC, log, run_child
from bench.servers import Server, serving_root
from bench.shapes import SHAPES
from bench.start_state import start_state, verify

GOAL = 1.2  # maintained / freshly compacted, full-table read wall
_READ = """
import sys, pyarrow as pa
from deltalake import DeltaTable, QueryBuilder
t = pa.table(QueryBuilder().register("t", DeltaTable(sys.argv[1])).execute("SELECT * FROM t"))
print(t.num_rows)
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--keys", type=int, default=1_000, help="keys changed per version")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply rows and keys (smoke runs)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", default=os.environ.get("SHARESYNC_BENCH_WORK", "/tmp/sharesync-bench") + "-read")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results"))
    args = parser.parse_args(argv)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    shape = dataclasses.replace(SHAPES["xl-1m-random-updates"], name="read-after-batches", rows=args.rows,
                                versions=args.batches, change_rows=args.keys).scaled(args.scale)  # fmt: skip
    w = wl.build(shape, args.seed, log=log)
    root = serving_root(work, "root", {w.name: w.table_path})
    server = Server(root, work, "main")
    targets: dict[str, Path] = {}
    facts: dict[str, dict[str, object]] = {}
    try:
        state = start_state(work, w, server.profile, peer=False, max_versions=1)
        for maintenance in ("auto", "off"):
            restore(state.sharesync_seed, state.sharesync)
            _set_compact(state.config, maintenance)
            log(f"{w.versions} batches, maintenance.compact: {maintenance} …")
            m = run_child([SHARESYNC, "--config", str(state.config), "sync"], log_to=work / "logs" / f"sync-{maintenance}.log")
            kept = work / f"after-{maintenance}"
            restore(state.sharesync, kept)
            targets[f"{maintenance}"] = kept / "target"
            facts[maintenance] = {"sync_wall": m.wall, "sync_cpu": m.cpu, **_shape_of(kept / "target")}
        compacted = work / "compacted"
        restore(work / "after-off", compacted)
        _set_compact(compacted / "sharesync.yaml", "off", home=compacted)
        run_child([SHARESYNC, "--config", str(compacted / "sharesync.yaml"), "optimize", "--force"],
                  log_to=work / "logs" / "optimize.log")  # fmt: skip
        targets["compacted"] = compacted / "target"
        facts["compacted"] = _shape_of(compacted / "target")
    finally:
        server.stop()
    verify(w, {name: path for name, path in targets.items()})
    log("every target equals the provider")
    reads = _read_interleaved(targets, args.runs, work)
    result = {"workload": {"rows": w.rows, "batches": w.versions, "keys": shape.change_rows}, "facts": facts,
              "reads": reads}  # fmt: skip
    text = report(result, args)
    print("\n" + text, flush=True)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    stamp = f"read-{time.strftime('%Y%m%d-%H%M%S')}" + (f"-scale{args.scale:g}" if args.scale != 1 else "")
    (results / f"{stamp}.json").write_text(json.dumps(result, indent=2, default=str))
    (results / f"{stamp}.md").write_text(text + "\n")
    return 0


def _set_compact(config: Path, compact: str, home: Path | None = None) -> None:
    """``home``: the copy of a run directory the config is to work in (its paths are absolute)."""
    raw = yaml.safe_load(config.read_text())
    raw.setdefault("defaults", {})["maintenance"] = {"compact": compact}
    if home is not None:
        raw |= {"state_store": f"sqlite:///{home / 'state.db'}", "staging_dir": str(home / "staging")}
        raw["tables"][0]["target"] = str(home / "target")
    config.write_text(yaml.safe_dump(raw, sort_keys=False))


def _shape_of(target: Path) -> dict[str, object]:
    from sharesync.pipelines.targets.delta.maintenance_facts import read_health
    from sharesync.sync.core.location import locate
    from sharesync.sync.core.storage import StorageSection

    health = read_health(locate(str(target), StorageSection()), small_file_bytes=32 * 2**20)
    assert health is not None
    compactions = sum('"sharesync-maintenance' in p.read_text() or '"operation":"OPTIMIZE"' in p.read_text()
                      for p in (target / "_delta_log").glob("*.json"))  # fmt: skip
    return {"files": health.files, "small_files": health.small_files, "mib": round(health.bytes / 2**20, 1),
            "deleted_ratio": round(health.deleted_ratio, 4), "compactions": compactions}  # fmt: skip


def _read_interleaved(targets: dict[str, Path], runs: int, work: Path) -> dict[str, dict[str, float]]:
    raw: dict[str, list[tuple[float, float]]] = {name: [] for name in targets}
    names = list(targets)
    for run in range(runs):
        for name in names[run % len(names) :] + names[: run % len(names)]:
            m = run_child([PYTHON, "-c", _READ, str(targets[name])], log_to=work / "logs" / f"read-{name}.log")
            raw[name].append((m.wall, m.cpu))
            log(f"  read {name:<10} run {run + 1}: {m.wall:6.2f} s  cpu {m.cpu:5.1f} s")
    return {name: {"wall": statistics.median(w for w, _ in xs), "cpu": statistics.median(c for _, c in xs)}
            for name, xs in raw.items()}  # fmt: skip


def report(result: dict, args: argparse.Namespace) -> str:
    reads, facts = result["reads"], result["facts"]
    base = reads["compacted"]
    lines = [
        f"REDUCED SCALE (--scale {args.scale:g})" if args.scale != 1 else "",
        f"read after batches, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, median of {args.runs} "
        f"run(s), load {os.getloadavg()[0]:.1f}: {json.dumps(result['workload'])}", "",
        "| target | files | small files | MiB | rows hidden by DVs | compactions | full read wall s | CPU s | × compacted wall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for name in ("auto", "off", "compacted"):
        f, r = facts[name], reads[name]
        lines.append(f"| {name} | {f['files']} | {f['small_files']} | {f['mib']} | {float(f['deleted_ratio']):.1%} | "
                     f"{f['compactions']} | {r['wall']:.2f} | {r['cpu']:.1f} | {r['wall'] / base['wall']:.2f} |")  # fmt: skip
    ratio = reads["auto"]["wall"] / base["wall"]
    verdict = "PASS" if ratio <= GOAL else "MISS"
    lines += ["", f"- [{verdict}] full-table read after {result['workload']['batches']} batches, maintenance on, vs "
              f"freshly compacted: {ratio:.2f}× (goal ≤ {GOAL}×)"]  # fmt: skip
    for name in ("auto", "off"):
        lines.append(f"- the {result['workload']['batches']} batches with compact: {name}: {facts[name]['sync_wall']:.1f} s "
                     f"wall, {facts[name]['sync_cpu']:.1f} s CPU")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
