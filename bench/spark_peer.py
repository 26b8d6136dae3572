"""The Spark peer: what a Spark user writes without ``delta-sharing-spark``, run as its own process.

``delta-sharing-spark`` (``readStream.format("deltaSharing")`` … ``foreachBatch`` MERGE) is the
pipeline a Spark user would write, but its jars are not served by this workplace's Maven mirror
(bench/README.md, "Apache Spark engine"). This is the next thing such a user writes: the official
``delta-sharing`` Python connector reads the share into pandas (``bench.peer``'s loads and its
newest-change-per-key rule, the same code), then the rows go to the Spark Connect server
(``createDataFrame`` from Arrow) and the server writes the Delta target:

* ``bootstrap``: ``load_as_pandas`` → ``createDataFrame`` → ``write.format("delta").mode("overwrite")``;
* ``incremental``: ``load_table_changes_as_pandas(starting_version=last+1)`` → newest change per key
  → ``createDataFrame`` → one ``MERGE INTO delta.`<target>``` (delete / update / insert clauses).

State in ``<target>.peer.json`` as ``bench.peer``. Nothing here imports sharesync.

``python -m bench.spark_peer --remote sc://127.0.0.1:P --profile P --table s.s.t --target DIR bootstrap|incremental``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from bench.peer import UPSERT, load_changes, load_snapshot, newest_per_key, state_file


def _session(remote: str):  # noqa: ANN202 - pyspark is imported lazily
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(remote).getOrCreate()


def bootstrap(remote: str, url: str, target: Path, version: int | None, key: str, delta: bool | None) -> dict:
    timings: dict[str, float] = {}
    began = time.monotonic()
    version, _, table = load_snapshot(url, version, delta)
    rows = table.num_rows
    timings["load"] = time.monotonic() - began
    mark = time.monotonic()
    spark = _session(remote)
    frame = spark.createDataFrame(table)
    del table
    timings["to_spark"] = time.monotonic() - mark
    mark = time.monotonic()
    frame.write.format("delta").mode("overwrite").save(str(target))
    timings["write"] = time.monotonic() - mark
    state_file(target).write_text(json.dumps({"version": version, "key": key}))
    return {"version": version, "rows": rows, "timings": timings}


def incremental(remote: str, url: str, target: Path, key: str, delta: bool | None) -> dict:
    last = int(json.loads(state_file(target).read_text())["version"])
    timings: dict[str, float] = {}
    began = time.monotonic()
    latest, schema, df = load_changes(url, last, delta)
    if df is None:
        return {"version": last, "rows": 0, "timings": {"poll": time.monotonic() - began}}
    timings["load"] = time.monotonic() - began
    rows = len(df)
    mark = time.monotonic()
    source = newest_per_key(df, key, schema)
    net = source.num_rows
    del df
    timings["dedup"] = time.monotonic() - mark
    mark = time.monotonic()
    spark = _session(remote)
    spark.createDataFrame(source).createOrReplaceTempView("s")
    del source
    timings["to_spark"] = time.monotonic() - mark
    mark = time.monotonic()
    columns = [f"`{c}`" for c in schema.names]
    updates = ", ".join(f"t.{c} = s.{c}" for c in columns)
    metrics = spark.sql(
        f"MERGE INTO delta.`{target}` t USING s ON t.`{key}` = s.`{key}` "
        f"WHEN MATCHED AND NOT ({UPSERT}) THEN DELETE "
        f"WHEN MATCHED AND {UPSERT} THEN UPDATE SET {updates} "
        f"WHEN NOT MATCHED AND {UPSERT} THEN INSERT ({', '.join(columns)}) "
        f"VALUES ({', '.join(f's.{c}' for c in columns)})"
    ).collect()
    timings["merge"] = time.monotonic() - mark
    state_file(target).write_text(json.dumps({"version": latest, "key": key}))
    counts = metrics[0].asDict() if metrics else {}
    return {"version": latest, "rows": rows, "net_keys": net, "timings": timings, **counts}


def warm_up(remote: str, path: Path) -> int:
    """One small Delta write and MERGE (``bench.run`` before measuring: the JVM's first statements —
    class loading, JIT — are not charged to whichever pipeline runs first). Returns the rows."""
    spark = _session(remote)
    spark.range(1000).selectExpr("id", "cast(id as string) v").write.format("delta").save(str(path))
    spark.range(500, 1500).selectExpr("id", "cast(id * 2 as string) v").createOrReplaceTempView("w")
    spark.sql(
        f"MERGE INTO delta.`{path}` t USING w ON t.id = w.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    ).collect()
    return spark.read.format("delta").load(str(path)).count()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["warmup"]:  # python -m bench.spark_peer warmup sc://… DIR
        print(json.dumps({"warmup_rows": warm_up(argv[1], Path(argv[2]))}))
        return 0
    parser = argparse.ArgumentParser(description="Spark peer: delta-sharing → pandas → Spark Connect MERGE")
    parser.add_argument("--remote", required=True, help="the Spark Connect server, sc://host:port")
    parser.add_argument("--profile", required=True, type=Path)
    parser.add_argument("--table", required=True, help="share.schema.table")
    parser.add_argument("--target", required=True, type=Path)
    parser.add_argument("--key", default="id")
    parser.add_argument("--delta-format", action="store_true", help="use_delta_format=True (DV tables)")
    sub = parser.add_subparsers(dest="command", required=True)
    boot = sub.add_parser("bootstrap")
    boot.add_argument("--version", type=int, default=None)
    sub.add_parser("incremental")
    args = parser.parse_args(argv)
    url = f"{args.profile}#{args.table}"
    target = args.target.resolve()
    began = time.monotonic()
    if args.command == "bootstrap":
        result = bootstrap(args.remote, url, target, args.version, args.key, args.delta_format or None)
    else:
        result = incremental(args.remote, url, target, args.key, args.delta_format or None)
    result["seconds"] = time.monotonic() - began
    print(json.dumps({"pipeline": "spark-peer", "command": args.command, **result}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
