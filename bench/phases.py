"""Where a ``sharesync sync`` process spends its wall time: the real CLI, with timers around its steps.

``python -m bench.phases --config CFG`` runs ``sharesync --config CFG sync`` in this process
after wrapping the engine's steps (module attributes, so nothing in the repo changes):

* ``imports``            — importing the CLI and engine modules;
* ``client.*``           — protocol calls (``table_version``, ``metadata``, ``changes``, ``query``);
* ``store.*``            — state store (lease, runs, checkpoint CAS);
* ``stage``              — download + staging of one batch (they overlap: staging runs per file
  in worker threads while other downloads continue); ``download`` is the downloader's call,
  ``stage_file`` the per-file rewrite summed over the worker threads (wall, can exceed the
  batch's wall) and its thread CPU time;
* ``engine_start``       — first ``get_spark()`` (embedded Sail start + Connect session);
* ``apply_*``            — the Spark job, split into ``inspect_target``, ``read_staged``,
  ``count_rows``, ``evolve``, ``register_target``, ``merge`` (the MERGE action itself),
  ``commit_metrics``, ``version_after`` (merge mode) or ``replace`` steps (bootstrap);
* ``exit``               — from the CLI's return to process exit is measured by the caller.

Prints the phases as one JSON line (seconds, call counts). Use with a restored incremental
state, e.g. ``/tmp/sharesync-bench/M/ss-inc`` after ``bench.run`` (see bench/README.md).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections import defaultdict

_PROCESS_START = time.monotonic()
_lock = threading.Lock()
totals: dict[str, float] = defaultdict(float)
counts: dict[str, int] = defaultdict(int)


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
    setattr(owner, attribute, timed(name, getattr(owner, attribute), cpu=cpu))


def instrument() -> None:
    import sharesync.pipelines.jobs.merge as merge
    import sharesync.pipelines.jobs.session as spark
    import sharesync.pipelines.jobs.snapshot as snapshot
    import sharesync.state.store as store
    import sharesync.sync.protocol.client as client
    import sharesync.sync.protocol.download as download
    import sharesync.sync.staging.batch as batch

    for method in ("table_version", "metadata", "changes", "query"):
        wrap(client.SharingClient, method, f"client.{method}")
    for method in ("get_checkpoint", "list_checkpoints", "advance_checkpoint", "start_run", "finish_run",
                   "acquire_lease", "release_lease", "renew_lease"):  # fmt: skip
        wrap(store.StateStore, method, f"store.{method}")
    wrap(batch, "stage", "stage (download+stage, wall)")
    wrap(batch, "stage_file", "stage_file (wall, summed over threads)", cpu=True)
    wrap(batch, "load_file", "load_file (wall, summed over threads)", cpu=True)
    wrap(batch, "write_netted", "write_netted (net in memory + write)", cpu=True)
    wrap(download.Downloader, "download", "download (wall, incl. staging hooks)")
    wrap(spark, "get_spark", "get_spark (engine start on 1st call)")
    wrap(merge, "apply_merge", "apply_merge (wall)")
    wrap(snapshot, "replace_target", "replace_target (wall)")
    for name in ("inspect_target", "read_staged", "register_target", "commit_metrics", "version_after",
                 "_evolve", "projection"):  # fmt: skip
        wrap(merge, name, f"apply_merge.{name}")
    for name in ("inspect_target", "read_staged", "count_rows", "commit_metrics", "version_after", "row_count",
                 "create_target"):  # fmt: skip
        wrap(snapshot, name, f"replace.{name}")
    wrap(merge, "net_staged_batch", "apply_merge.net_staged_batch")
    wrap(merge, "row_count", "apply_merge.row_count")
    wrap(merge, "rewrite_target", "apply_merge.rewrite_target (Spark: count + overwrite)")
    original_writer = merge._merge_writer

    def merge_writer(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        writer = original_writer(*args, **kwargs)

        class Timed:
            def merge(self) -> object:
                return timed("apply_merge.MERGE (Spark action)", writer.merge)()

        return Timed()

    merge._merge_writer = merge_writer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="phase timings of one 'sharesync sync'")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    began = time.monotonic()
    import sharesync.pipelines.run.engine  # noqa: F401
    import sharesync.sync.cli.main as cli
    import sharesync.sync.cli.syncing  # noqa: F401

    _record("imports (cli + engine)", time.monotonic() - began)
    instrument()
    began = time.monotonic()
    try:
        cli.main(["--config", args.config, "sync"])
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    _record("cli.main (total)", time.monotonic() - began)
    phases = {k: round(v, 3) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}
    print(json.dumps({"phases": phases, "calls": dict(counts), "in_process": time.monotonic() - _PROCESS_START}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
