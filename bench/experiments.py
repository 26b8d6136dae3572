"""What the incremental MERGE would cost done differently — the evidence behind the proposals.

    .venv/bin/python -m bench.experiments --shape M       # after 'bench.run' made the incremental seed

Steps (each variant in its own child process, measured like ``bench.run``: wall and peak RSS):

1. ``capture``: restore the incremental start state, run ``sharesync sync`` up to the moment
   ``sharesync.pipelines.modes.merge.merge.apply_merge`` is called, copy the staged batch aside, stop.
2. ``net-arrow``: the batch's net change per key computed with pyarrow (one sort on key,
   version desc, change rank), written as one parquet file — what staging could hand over.
3. Sail (embedded, through ``sharesync.pipelines.modes.merge.merge.apply_merge`` on a copy of the start target, the
   netted batch as the stager writes it): ``sail-merge`` (the MERGE statement) and
   ``sail-rewrite`` (the copy-on-write rewrite, ``sharesync.pipelines.modes.merge.rewrite``).
4. ``deltars``: ``deltalake`` MERGE of the Arrow-netted file with the same guard clauses.

Every MERGE variant must report the same inserted/updated/deleted counts; they are printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

WORK = Path("/tmp/sharesync-bench")


def _paths(size: str) -> dict[str, Path]:
    base = WORK / size
    return {
        "seed": base / "ss-inc-seed",
        "run": base / "ss-inc",
        "staged": base / "exp-staged",
        "net": base / "exp-net",
        "target": base / "exp-target",
    }


def capture(size: str) -> dict:
    import sharesync.pipelines.modes.merge.merge as merge
    import sharesync.sync.cli.main as cli
    from sharesync.sync.core.location import locate

    p = _paths(size)
    shutil.rmtree(p["run"], ignore_errors=True)
    shutil.copytree(p["seed"], p["run"])

    class Captured(Exception):
        pass

    def grab(spark, staged, target, **kwargs):  # noqa: ANN001, ANN003, ANN202
        shutil.rmtree(p["staged"], ignore_errors=True)
        shutil.copytree(locate(staged).path, p["staged"])
        raise Captured

    merge.apply_merge = grab
    try:
        cli.main(["--config", str(p["run"] / "sharesync.yaml"), "sync"])
    except (Captured, SystemExit):
        pass
    return {"staged_files": len(list(p["staged"].glob("*.parquet")))}


def net_arrow(size: str) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    p = _paths(size)
    began = time.monotonic()
    table = ds.dataset(str(p["staged"]), format="parquet").to_table()
    read = time.monotonic() - began
    change = table.column("_change_type")
    upsert = pc.is_in(change, pa.array(["insert", "update_postimage"]))
    rank = pc.if_else(upsert, 0, pc.if_else(pc.equal(change, "delete"), 1, 2))
    keys = pa.table({"id": table.column("id"), "v": table.column("_commit_version"), "r": rank})
    order = pc.sort_indices(keys, sort_keys=[("id", "ascending"), ("v", "descending"), ("r", "ascending")])
    ids = pc.take(table.column("id"), order).to_numpy()
    first = np.ones(len(ids), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    net = table.take(pc.filter(order, pa.array(first)))
    netted = time.monotonic() - began - read
    shutil.rmtree(p["net"], ignore_errors=True)
    p["net"].mkdir(parents=True)
    pq.write_table(net, p["net"] / "net.parquet", compression="lz4")
    return {
        "rows": table.num_rows,
        "net_rows": net.num_rows,
        "read_s": read,
        "net_s": netted,
        "write_s": time.monotonic() - began - read - netted,
    }


def _fresh_target(size: str) -> str:
    p = _paths(size)
    shutil.rmtree(p["target"], ignore_errors=True)
    shutil.copytree(p["seed"] / "target", p["target"])
    return str(p["target"])


def sail(size: str, variant: str) -> dict:
    """The netted batch through ``apply_merge`` on embedded Sail, as a MERGE or as a rewrite."""
    import pyarrow.parquet as pq

    import sharesync.pipelines.modes.merge.merge as merge
    import sharesync.pipelines.modes.merge.rewrite as rewrite
    from sharesync.pipelines.jobs.session import SparkEngine
    from sharesync.sync.staging.netting import write_netted

    counting = {"count_s": 0.0}  # the rewrite's first pass (what applies), apart from its write
    count = rewrite._count

    def timed_count(changes):  # noqa: ANN001, ANN202
        started = time.monotonic()
        try:
            return count(changes)
        finally:
            counting["count_s"] += time.monotonic() - started

    rewrite._count = timed_count

    p = _paths(size)
    target = _fresh_target(size)
    staged = p["net"].with_name("exp-net-staged")
    shutil.rmtree(staged, ignore_errors=True)
    staged.mkdir(parents=True)
    write_netted(pq.read_table(p["net"] / "net.parquet"), ["id"], staged)  # as the stager leaves it
    spark = SparkEngine().session()
    began = time.monotonic()
    threshold = None if variant == "sail-merge" else 0.0
    stats = merge.apply_merge(spark, staged, target, keys=["id"], rewrite_threshold=threshold)
    return {
        "merge_s": time.monotonic() - began,
        **counting,
        "inserted": stats.inserted,
        "updated": stats.updated,
        "deleted": stats.deleted,
    }


def deltars(size: str) -> dict:
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    p = _paths(size)
    target = _fresh_target(size)
    began = time.monotonic()
    net = pq.read_table(p["net"] / "net.parquet")
    columns = [c for c in net.column_names if not c.startswith("_")]
    upsert = "s._change_type IN ('insert', 'update_postimage')"
    newer = "s._commit_version > t._sharesync_version"
    values = {
        **{f"`{c}`": f"s.`{c}`" for c in columns},
        "_sharesync_version": "s._commit_version",
        "_sharesync_commit_timestamp": "s._commit_timestamp",
    }
    metrics = (
        DeltaTable(target)
        .merge(net, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete(predicate=f"{newer} AND NOT ({upsert})")
        .when_matched_update(updates=values, predicate=f"{newer} AND {upsert}")
        .when_not_matched_insert(updates=values, predicate=upsert)
        .execute()
    )
    return {
        "merge_s": time.monotonic() - began,
        "inserted": metrics["num_target_rows_inserted"],
        "updated": metrics["num_target_rows_updated"],
        "deleted": metrics["num_target_rows_deleted"],
    }


VARIANTS = ("net-arrow", "sail-merge", "sail-rewrite", "deltars")


def child(step: str, size: str) -> None:
    if step == "capture":
        result = capture(size)
    elif step == "net-arrow":
        result = net_arrow(size)
    elif step == "deltars":
        result = deltars(size)
    else:
        result = sail(size, step)
    print(json.dumps({"step": step, **result}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", "--size", dest="size", default="M", help="a shape bench.run measured last")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.size)
        return 0
    from bench.measure import PYTHON, log, run_child
    from bench.servers import Server, serving_root

    _ = serving_root  # the server must serve the generated tables: reuse bench.run's root
    root = WORK / "root"
    if not root.is_dir():
        raise SystemExit("run 'python -m bench.run' first (it builds the serving root and the incremental seed)")
    server = Server(root, WORK, "experiments")
    try:
        # The seed's config points at WORK/main.share; rewrite it to this server's profile.
        profile_env = {"SHARESYNC_PROFILE": str(server.profile)}
        logs = WORK / "logs"
        m = run_child(
            [PYTHON, "-m", "bench.experiments", "--size", args.size, "--child", "capture"],
            log_to=logs / "exp-capture.log",
            env=profile_env,
        )
        log(f"capture: {m.output}")
        for variant in args.variants:
            m = run_child(
                [PYTHON, "-m", "bench.experiments", "--size", args.size, "--child", variant],
                log_to=logs / f"exp-{variant}.log",
            )
            log(
                f"{variant:<24} process {m.wall:6.2f} s  peak RSS {m.maxrss_mib:6.0f} MiB  cpu {m.cpu:5.1f} s  {m.output}"
            )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
