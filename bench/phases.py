"""Where a ``sharesync sync`` process spends its wall time, on any workload shape.

    .venv/bin/python -m bench.phases --shape narrow                 # incremental, 3 runs, medians
    .venv/bin/python -m bench.phases --shape small M --scenario bootstrap incremental
    .venv/bin/python -m bench.phases --config CFG                   # one instrumented run, in this process

With ``--shape``: builds (or reuses) the shape's workload (``bench.workload``), serves it with its
own sharing server, prepares the scenario as ``bench.run`` does (a fresh target for
``bootstrap``; the target and checkpoint at the start version, restored before every run, for
``incremental``) and runs each instrumented pass as a fresh child measured like ``bench.run``
(wall, peak RSS, CPU). Prints the median of every phase. ``bench.run --phases`` adds one such
run per scenario to the benchmark's report.

With ``--config`` (the child): runs ``sharesync --config CFG sync`` in this process after
wrapping the engine's steps (module attributes, so nothing in the repo changes):

* ``imports``            — importing the CLI and engine modules;
* ``client.*``           — protocol calls (``table_version``, ``metadata``, ``changes``, ``query``);
* ``store.*``            — state store (lease, runs, checkpoint CAS);
* ``stage``              — download + staging of one batch (they overlap: staging runs per file
  in worker threads while other downloads continue); ``download`` is the downloader's call,
  ``stage_file``/``load_file`` the per-file work summed over the worker threads (wall, can
  exceed the batch's wall) and its thread CPU time; ``write_netted`` the in-memory netting;
* ``SparkEngine.session`` — first call: embedded Sail start + Connect session;
* ``apply_merge.*`` / ``replace.*`` — the Spark job's steps (merge mode / bootstrap);
* ``interpreter start + exit`` — the child's wall outside this module's ``main``.

A step the product no longer has is skipped and listed under ``missing`` (the product moves;
the breakdown should not break with it). Prints the phases as one JSON line.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

_PROCESS_START = time.monotonic()
_lock = threading.Lock()
totals: dict[str, float] = defaultdict(float)
counts: dict[str, int] = defaultdict(int)
missing: list[str] = []


def _record(name: str, seconds: float) -> None:
    with _lock:
        totals[name] += seconds
        counts[name] += 1


def timed(name: str, fn, *, cpu: bool = False):  # noqa: ANN001, ANN201
    """Wall time of each call under ``name``; with ``cpu``, also the calling thread's CPU time."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        began, began_cpu = time.monotonic(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(name, time.monotonic() - began)
            if cpu:
                _record(name.split(" (")[0] + " (thread CPU)", time.thread_time() - began_cpu)

    return wrapper


def wrap(owner: object, attribute: str, name: str, *, cpu: bool = False) -> None:
    if not hasattr(owner, attribute):
        missing.append(f"{getattr(owner, '__name__', owner)}.{attribute}")
        return
    setattr(owner, attribute, timed(name, getattr(owner, attribute), cpu=cpu))


def instrument() -> None:
    import sharesync.pipelines.jobs.session as spark
    import sharesync.pipelines.modes.merge.merge as merge
    import sharesync.pipelines.modes.merge.rewrite as rewrite
    import sharesync.pipelines.modes.snapshot.snapshot as snapshot
    import sharesync.pipelines.targets.delta.commit_metrics as metrics
    import sharesync.pipelines.targets.delta.write as write
    import sharesync.state.store as store
    import sharesync.sync.protocol.client as client
    import sharesync.sync.protocol.download as download
    import sharesync.sync.staging.batch as batch

    for method in ("table_version", "metadata", "changes", "query"):
        wrap(client.SharingClient, method, f"client.{method}")
    for method in (
        "get_checkpoint",
        "list_checkpoints",
        "advance_checkpoint",
        "start_run",
        "finish_run",
        "acquire_lease",
        "release_lease",
        "renew_lease",
    ):
        wrap(store.StateStore, method, f"store.{method}")
    wrap(batch, "stage", "stage (download+stage, wall)")
    wrap(batch, "stage_file", "stage_file (wall, summed over threads)", cpu=True)
    wrap(batch, "load_file", "load_file (wall, summed over threads)", cpu=True)
    wrap(batch, "write_netted", "write_netted (net in memory + write)", cpu=True)
    wrap(download.Downloader, "download", "download (wall, incl. staging hooks)")
    wrap(spark.SparkEngine, "session", "SparkEngine.session (engine start on 1st call)")
    wrap(merge, "apply_merge", "apply_merge (wall)")  # the merge strategy imports it when it applies a batch
    wrap(snapshot, "replace_target", "replace_target (wall)")
    for name in ("read_staged", "_evolve", "projection"):
        wrap(merge, name, f"apply_merge.{name}")
    for name in ("state", "register", "rows", "create"):  # the target format's writer, for every job
        wrap(write.DeltaWriter, name, f"writer.{name}")
    wrap(metrics, "commit_metrics", "commit_metrics (the strategies count a job's commits)")
    wrap(merge, "rewrite_target", "apply_merge.rewrite_target (Spark: count + overwrite)")
    wrap(rewrite, "_count", "apply_merge.rewrite_target: count what applies (Spark action)")
    for name in ("read_staged", "count_rows"):
        wrap(snapshot, name, f"replace.{name}")
    if hasattr(merge, "_merge_writer"):
        original_writer = merge._merge_writer

        def merge_writer(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            writer = original_writer(*args, **kwargs)

            class Timed:
                def merge(self) -> object:
                    return timed("apply_merge.MERGE (Spark action)", writer.merge)()

            return Timed()

        merge._merge_writer = merge_writer


def child(config: str) -> None:
    began = time.monotonic()
    import sharesync.pipelines.run.sync_pass  # noqa: F401
    import sharesync.sync.cli.main as cli
    import sharesync.sync.cli.syncing  # noqa: F401

    _record("imports (cli + engine)", time.monotonic() - began)
    instrument()
    began = time.monotonic()
    try:
        cli.main(["--config", config, "sync"])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    _record("cli.main (total)", time.monotonic() - began)
    phases = {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}
    print(
        json.dumps(
            {
                "phases": phases,
                "calls": dict(counts),
                "missing": missing,
                "in_process": time.monotonic() - _PROCESS_START,
            }
        )
    )
    sys.stdout.flush()


# ---------------------------------------------------------------- driver


def instrumented(config: Path, prepare: Callable[[], None], log_to: Path, server_pid: int | None) -> dict:
    """One instrumented ``sharesync sync`` as a fresh child: its phases, wall, peak RSS and CPU."""
    from bench.measure import PYTHON, run_child

    prepare()
    m = run_child([PYTHON, "-m", "bench.phases", "--config", str(config)], log_to=log_to, server_pid=server_pid)
    phases = {**m.output.get("phases", {}), "process (wall)": m.wall}
    phases["interpreter start + exit"] = m.wall - m.output.get("in_process", m.wall)
    phases = dict(sorted(phases.items(), key=lambda kv: -kv[1]))
    return {"phases": phases, "maxrss_mib": m.maxrss_mib, "cpu": m.cpu, "missing": m.output.get("missing", [])}


def drive(labels: list[str], scenarios: list[str], runs: int, scale: float, seed: int, work: Path) -> None:
    from bench import run as br
    from bench import workload as wl

    for label in labels:
        w = wl.build(wl.SHAPES[label].scaled(scale), seed, log=br.log)
        base = work / "phases" / label
        server = br.Server(br.serving_root(base, "root", {w.name: w.table_path}), base, "main")
        try:
            for scenario in scenarios:
                if scenario == "bootstrap":
                    config, prepare = br.sharesync_bootstrap(base, server.profile, w.full_name)
                else:
                    state = br.start_state(base, w, server.profile, peer=False)
                    config, prepare = state.config, state.restore_sharesync
                done = [
                    instrumented(config, prepare, base / "logs" / f"{scenario}-{i}.log", server.pid)
                    for i in range(runs)
                ]
                report(f"{label}-{scenario} ({w.name}, scale {scale:g})", done)
        finally:
            server.stop()


def report(title: str, done: list[dict]) -> None:
    names = list(dict.fromkeys(name for run in done for name in run["phases"]))
    median = {n: statistics.median(run["phases"].get(n, 0.0) for run in done) for n in names}
    rss = statistics.median(run["maxrss_mib"] for run in done)
    cpu = statistics.median(run["cpu"] for run in done)
    print(f"\n{title}: median of {len(done)} run(s), peak RSS {rss:.0f} MiB, CPU {cpu:.1f} s\n")
    print("| phase | wall s |\n|---|---:|")
    for name in sorted(names, key=lambda n: -median[n]):
        print(f"| {name} | {median[name]:.3f} |")
    if done[0]["missing"]:
        print(f"\nnot instrumented (no longer in the product): {', '.join(done[0]['missing'])}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="phase timings of 'sharesync sync', per workload shape")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--config", help="one instrumented run of this config, in this process")
    which.add_argument("--shape", nargs="+", help="workload shapes to break down (bench.workload.SHAPES, or all)")
    parser.add_argument("--scenario", nargs="+", default=["incremental"], choices=["bootstrap", "incremental"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--work", default="/tmp/sharesync-bench", help="scratch directory (under <work>/phases)")
    args = parser.parse_args(argv)
    if args.config:  # the child imports nothing of the bench's (numpy, pyarrow) before the CLI does
        child(args.config)
    else:
        from bench.shapes import SHAPES

        labels = list(SHAPES) if "all" in args.shape else args.shape
        if unknown := set(labels) - set(SHAPES):
            parser.error(f"unknown shapes {sorted(unknown)}; choose from {[*SHAPES, 'all']}")
        drive(labels, args.scenario, args.runs, args.scale, args.seed, Path(args.work).resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
