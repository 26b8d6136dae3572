"""In-process probes, each run as its own child process by ``bench.run``.

* ``noop --config CFG``: import time of the engine modules, then ``Syncer.sync_all()`` on a
  config whose tables are all up to date — the first call (creates the HTTP client, reads the
  checkpoints) and the median of ``--repeat`` more; checks every outcome is ``up_to_date`` and
  that no Spark engine was started (``pysail`` never imported, no embedded server), and lists
  which of the modules a no-op pass should not need were imported (``heavy_imported``).
* ``poll --config CFG``: ``Syncer.source_versions()`` over every configured table (1,000 in
  the benchmark) — first call and median of ``--repeat`` more; counts tables that failed.
* ``warm --config CFG --warmup CFG0``: two ``sharesync sync`` passes in one process, as
  ``sharesync sync --every`` runs them — a pass with changes on ``CFG0`` (it imports, starts the
  engine, writes a target), then the measured pass on ``CFG``; both must sync their tables.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

# What a pass with nothing new should never import (each costs 0.05-0.3 s of start-up).
HEAVY_MODULES = ("sqlalchemy", "alembic", "pydantic_settings", "pyarrow", "deltalake", "pyspark", "pysail", "dagster")


def _timed(fn):  # noqa: ANN001, ANN202
    began = time.perf_counter()
    value = fn()
    return time.perf_counter() - began, value


def noop(config_file: str, repeat: int) -> dict[str, object]:
    began = time.perf_counter()
    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.sync.core.config import load_config

    imported = time.perf_counter() - began
    config = load_config(config_file)
    with Syncer(config) as syncer:
        first, results = _timed(syncer.sync_all)
        warm = [_timed(syncer.sync_all)[0] for _ in range(repeat)]
    outcomes = sorted({r.outcome.value for r in results})
    heavy_imported = sorted(m for m in HEAVY_MODULES if m in sys.modules)
    import sharesync.pipelines.jobs.session as spark_module

    return {
        "import_seconds": imported,
        "first_call_seconds": first,
        "warm_call_seconds": statistics.median(warm) if warm else None,
        "warm_calls": warm,
        "outcomes": outcomes,
        "tables": len(results),
        "pysail_imported": "pysail" in sys.modules,
        "pyspark_imported": "pyspark" in sys.modules,
        "engine_started": spark_module._EMBEDDED._server is not None,
        "heavy_imported": heavy_imported,
    }


def poll(config_file: str, repeat: int) -> dict[str, object]:
    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.sync.core.config import load_config

    config = load_config(config_file)
    with Syncer(config) as syncer:
        first, versions = _timed(syncer.source_versions)
        warm = [_timed(syncer.source_versions)[0] for _ in range(repeat)]
    failed = [name for name, v in versions.items() if not isinstance(v, int)]
    return {
        "tables": len(versions),
        "failed": len(failed),
        "first_error": str(versions[failed[0]]) if failed else None,
        "first_call_seconds": first,
        "warm_call_seconds": statistics.median(warm) if warm else None,
        "warm_calls": warm,
    }


def warm(config_file: str, warmup_file: str) -> dict[str, object]:
    from sharesync.state import open_store
    from sharesync.sync.cli.main import main
    from sharesync.sync.core.config import load_config

    def one_pass(path: str) -> float:
        """The CLI's pass (config, syncer, sync, printed results), as one ``--every`` pass runs it."""
        config = load_config(path)
        store = open_store(config.state_store)

        def checkpoints() -> list[int | None]:
            return [getattr(store.get_checkpoint(t.name), "version", None) for t in config.tables]

        before = checkpoints()
        began = time.perf_counter()
        try:
            main(["--config", path, "sync"])
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise SystemExit(f"the pass on {path} failed ({exc.code})") from None
        seconds = time.perf_counter() - began
        if checkpoints() == before:
            raise SystemExit(f"the pass on {path} synced nothing (checkpoints {before})")
        return seconds

    warmup = one_pass(warmup_file)
    measured = one_pass(config_file)
    return {"warmup_seconds": warmup, "warm_pass_seconds": measured}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="in-process probes: no-op sync, version polling, a warm pass")
    parser.add_argument("probe", choices=["noop", "poll", "warm"])
    parser.add_argument("--config", required=True)
    parser.add_argument("--warmup", help="warm: the config of the first (unmeasured) pass")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.probe == "warm":
        result = warm(args.config, args.warmup)
    else:
        result = noop(args.config, args.repeat) if args.probe == "noop" else poll(args.config, args.repeat)
    print(json.dumps({"probe": args.probe, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
