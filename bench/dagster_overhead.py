"""Dagster's own overhead next to sharesync's (issue 34): one small table, one run each.

    .venv/bin/python -m bench.dagster_overhead --runs 5

One 1 k-row table (``bench.table_count``'s workload) in a sharesync config with a SQLite store,
synced to its start version. Interleaved, each a child process measured from outside
(``bench.run.run_child``): ``sharesync sync`` and ``dagster asset materialize`` of the table's
asset from the project's code location (``sharesync.pipelines.dagster.definitions``, in-process
executor, ``DAGSTER_HOME`` in the work directory) — with nothing new (a server whose table stops
at the start version) and with one new version (the start state restored before every run).
The difference is what a Dagster run adds: its imports, loading the code location, the run's
storage and event log.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from bench import run as br
from bench import table_count as tc
from bench import workload as wl


def dagster_argv(asset: str) -> list[str]:
    # In-process executor: the run is the process, as with sharesync.
    run_config: dict[str, object] = {"execution": {"config": {"in_process": {}}}}
    return [str(br.VENV_BIN / "dagster"), "asset", "materialize", "-m", "sharesync.pipelines.dagster.definitions",
            "--select", asset, "--config-json", json.dumps(run_config)]  # fmt: skip


def _diff(dagster: dict[str, object], sharesync: dict[str, object], field: str) -> str:
    a, b = dagster[field], sharesync[field]
    assert isinstance(a, float) and isinstance(b, float)
    return f"{a - b:.2f} s ({a / b:.2f}× sharesync's)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="a Dagster run's overhead next to a sharesync pass")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--work", default=os.environ.get("SHARESYNC_BENCH_WORK", "/tmp/sharesync-bench") + "-dagster")
    parser.add_argument("--results", default=str(br.RESULTS))
    args = parser.parse_args(argv)
    work = Path(args.work).resolve()
    br.remove(work)
    (work / "dagster-home").mkdir(parents=True)
    w = tc.workload(argparse.Namespace(rows=1000, seed=7))
    start_table = wl.start_root(w) / wl.SHARE / wl.SCHEMA / w.name
    main_server = br.Server(br.serving_root(work, "root", {"t0000": w.table_path}), work, "main")
    start_server = br.Server(br.serving_root(work, "root-start", {"t0000": start_table}), work, "start")
    try:
        at_start = {"SHARESYNC_PROFILE": str(start_server.profile)}
        configs = {}
        for name in ("noop", "change"):  # a restored target is looked at closer: the no-op's is never restored
            directory = work / name
            directory.mkdir()
            configs[name] = directory / "sharesync.yaml"
            raw = tc.config_dict(directory, main_server.profile, ["t0000"], f"sqlite:///{directory / 'state.db'}")
            configs[name].write_text(yaml.safe_dump(raw, sort_keys=False))
            br.run_child(br.sharesync_argv(configs[name]), log_to=work / "logs" / f"setup-{name}.log", env=at_start)
        seed = work / "change-seed"
        shutil.copytree(work / "change", seed)
        home = {"DAGSTER_HOME": str(work / "dagster-home")}
        asset = f"sharesync/{wl.SHARE}/{wl.SCHEMA}/t0000"

        def restore() -> None:
            br.restore(seed, work / "change")

        def nothing() -> None:
            pass

        noop_env = {**at_start, "SHARESYNC_CONFIG": str(configs["noop"]), **home}
        change_env = {"SHARESYNC_CONFIG": str(configs["change"]), **home}
        jobs = {
            "sharesync no-op": (br.sharesync_argv(configs["noop"]), nothing, at_start),
            "dagster no-op": (dagster_argv(asset), nothing, noop_env),
            "sharesync change": (br.sharesync_argv(configs["change"]), restore, {}),
            "dagster change": (dagster_argv(asset), restore, change_env),
        }
        results = tc._measure_jobs(jobs, args.runs, work, "dagster", main_server.pid)
        br.verify(w, {"dagster-synced table": work / "change" / "target-0"})
    finally:
        main_server.stop()
        start_server.stop()
    lines = [f"Dagster overhead, {time.strftime('%Y-%m-%d %H:%M')}, medians of {args.runs}, load "
             f"{os.getloadavg()[0]:.1f}", "", "| run | wall s | peak RSS MiB | CPU s |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {k} | {r['wall']:.2f} | {r['maxrss_mib']:.0f} | {r['cpu']:.1f} |" for k, r in results.items()]
    for case in ("no-op", "change"):
        d, s = results[f"dagster {case}"], results[f"sharesync {case}"]
        lines.append(f"{case}: a Dagster run adds {_diff(d, s, 'wall')} wall and {_diff(d, s, 'cpu')} CPU")
    text = "\n".join(lines)
    print(text, flush=True)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"dagster-overhead-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
