"""The sharesync benchmark (issues 7, 16): sharesync vs the peer pipeline vs the limit, per workload shape.

    .venv/bin/python -m bench.run                               # every shape, 3 runs each
    .venv/bin/python -m bench.run --shape narrow small          # some shapes
    .venv/bin/python -m bench.run --scale 0.05 --runs 1         # the harness end to end, small data

Shapes (``bench.shapes.SHAPES``): ``narrow``, ``wide-strings``, ``small``, ``M``, ``L``, ``dv``, and the
size curve ``xl-1m`` … ``xl-50m`` (``--shape xl`` = 1m, 5m, 20m; the others by name; not in ``all``). One
sharing server subprocess (``sharesync serve``, URL lifetime one day) serves every generated
table over loopback. Every measured step is a fresh child process; the harness takes its wall
time (monotonic clock around ``fork`` … ``os.wait4``) and its peak RSS and CPU time from
``wait4``'s rusage (the child's own ``ru_maxrss``: sharesync's embedded Sail engine runs inside
that process, so it is included; :mod:`bench.measure`). Runs are interleaved (the pipeline order rotates per run) so
load from elsewhere hits all of them alike; medians are reported.

Scenarios per shape (:mod:`bench.scenarios`):

* ``bootstrap``   — fresh target and state; sync the latest snapshot.
* ``incremental`` — from a target and checkpoint at the version before the change versions:
  set up once (unmeasured) through a second, short-lived server whose copy of the table
  stops at that version (same table id and files), then copied back before every run.
* ``warm``        — the incremental batch as the second pass of one process, as ``sharesync
  sync --every`` runs it (``bench.probe warm``: first a bootstrap pass of the same table into
  another target, then the measured pass); the pass's own wall time.
* ``noop``        — ``sharesync sync`` when nothing is new (process wall time), and the
  in-process ``Syncer.sync_all()`` call (``bench.probe noop``).
* ``poll``        — ``Syncer.source_versions()`` over 1,000 configured tables
  (``bench.probe poll``); measured once, not per shape.
* ``history``     — the incremental batch in history mode vs merge mode (``bench.history``;
  issue 14's goal: ≤ 1.5× merge mode in wall time and peak RSS).

After each scenario both targets must equal the provider's table at its latest version (every
column, every row). ``--phases`` adds one instrumented sharesync run per scenario
(``bench.phases``): where its time goes. Results: a table on stdout, the goals of issue 16 with
PASS/MISS (:mod:`bench.goals`), and ``<results>/<stamp>.json`` / ``.md`` (default ``bench/results``,
gitignored; :mod:`bench.report`). This module is the command line; the other bench modules
(bench/scale.py, …) also reach the harness's parts through it (``bench.run.run_child`` …).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bench import measure
from bench.commands import limit_argv, peer_argv, remove, restore, sharesync_argv, sharesync_bootstrap, write_config
from bench.measure import PYTHON, REPO, SHARESYNC, Measure, log, rss_floor, run_child
from bench.measure import process_cpu as _server_cpu
from bench.scenarios import PIPELINES, SCENARIOS, Bench
from bench.servers import Server, SparkServer, serving_root
from bench.shapes import SHAPES, XL_PATTERNS, XL_SHAPES
from bench.start_state import StartState, start_state, verify

XL_SIZES = ("1m", "5m", "20m")  # --shape xl: the size curve on both engines (xl-50m by name)

__all__ = [  # the harness's parts, as bench/scale.py and one-off scripts reach them: bench.run.<name>
    "PYTHON", "REPO", "RESULTS", "SHARESYNC", "Bench", "Measure", "Server", "SparkServer", "StartState",
    "_server_cpu", "limit_argv", "log", "main", "peer_argv", "remove", "restore", "rss_floor", "run_child",
    "serving_root", "sharesync_argv", "sharesync_bootstrap", "start_state", "verify", "write_config",
]  # fmt: skip

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sharesync vs peer vs limit, per workload shape (issues 7, 16)")
    parser.add_argument("--shape", "--size", nargs="+", default=["all"], choices=[*SHAPES, "all", "xl", "xl-patterns"],
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
    measure.RSS_LIMIT_KB = int(args.rss_limit_gib * 2**20)  # for every child of this run
    every = [s for s in SHAPES if s not in XL_SHAPES]  # the XL curve is asked for by name: --shape xl
    args.shape = every if "all" in args.shape else list(dict.fromkeys(args.shape))
    groups = {"xl": [f"xl-{size}" for size in XL_SIZES],
              "xl-patterns": [f"xl-{size}-{p}" for p in XL_PATTERNS for size in XL_SIZES]}  # fmt: skip
    args.shape = list(dict.fromkeys(s for name in args.shape for s in groups.get(name, [name])))
    if args.quick:
        args.scale = 0.1
        if "--runs" not in (argv if argv is not None else sys.argv[1:]):
            args.runs = 1
    Bench(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
