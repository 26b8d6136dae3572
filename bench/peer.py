"""The peer pipeline: what a user would write instead of sharesync, run as its own process.

The official ``delta-sharing`` connector reads the share into pandas, pandas keeps the newest
change per key, and ``deltalake`` writes/MERGEs the result into a local Delta table:

* ``bootstrap``: ``get_table_version`` → ``load_as_pandas(url, version=V)`` →
  ``pa.Table.from_pandas`` (cast to the share's schema) → ``write_deltalake(mode="overwrite")``;
* ``incremental``: ``load_table_changes_as_pandas(url, starting_version=last+1)`` (all new
  versions in one call) → sort by ``_commit_version``/change rank, ``drop_duplicates(keep="last")``
  per key → one ``deltalake`` MERGE (delete / update / insert clauses).

``--delta-format``: ``use_delta_format=True`` on both loads — how the connector reads tables with
deletion vectors or column mapping (through ``delta-kernel-rust-sharing-wrapper``).

The last applied version is kept in ``<target>.peer.json``. Nothing here imports sharesync: the
peer must stand on its own. Prints one JSON line with the phase timings and row counts.

``python -m bench.peer --profile P --table share.schema.table --target DIR bootstrap [--version V]``
``python -m bench.peer --profile P --table share.schema.table --target DIR incremental``
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

_PRIMITIVES = {
    "long": "int64", "integer": "int32", "short": "int16", "byte": "int8", "double": "float64",
    "float": "float32", "string": "string", "boolean": "bool_", "date": "date32", "binary": "binary",
}  # fmt: skip


def arrow_schema(schema_string: str):  # noqa: ANN201 - pyarrow is imported lazily like the rest
    """The share's Delta schema (primitive types only) as an Arrow schema."""
    import pyarrow as pa

    fields = []
    for field in json.loads(schema_string)["fields"]:
        kind = field["type"]
        if kind in _PRIMITIVES:
            arrow = getattr(pa, _PRIMITIVES[kind])()
        elif kind == "timestamp":
            arrow = pa.timestamp("us", tz="UTC")
        elif (m := re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", kind)) is not None:
            arrow = pa.decimal128(int(m.group(1)), int(m.group(2)))
        else:
            raise SystemExit(f"peer: unsupported type {kind!r}")
        fields.append(pa.field(field["name"], arrow, nullable=field.get("nullable", True)))
    return pa.schema(fields)


def state_file(target: Path) -> Path:
    return target.with_name(target.name + ".peer.json")


def bootstrap(url: str, target: Path, version: int | None, key: str, delta: bool | None) -> dict[str, object]:
    from deltalake import write_deltalake

    timings: dict[str, float] = {}
    began = time.monotonic()
    version, _, table = load_snapshot(url, version, delta)
    rows = table.num_rows
    timings["load"] = time.monotonic() - began
    mark = time.monotonic()
    write_deltalake(str(target), table, mode="overwrite")
    timings["write"] = time.monotonic() - mark
    state_file(target).write_text(json.dumps({"version": version, "key": key}))
    return {"version": version, "rows": rows, "timings": timings}


# A change row is applied when it is an insert or an update's postimage; otherwise its key is deleted.
UPSERT = "s._change_type IN ('insert', 'update_postimage')"


def newest_per_key(df, key: str, schema):  # noqa: ANN001, ANN201 - pandas/pyarrow imported lazily
    """The newest change per key of a change-feed DataFrame, as an Arrow table of the share's columns
    plus ``_change_type``; within a version an insert/postimage beats a delete beats a preimage."""
    import pyarrow as pa

    rank = df["_change_type"].map({"update_preimage": 0, "delete": 1, "insert": 2, "update_postimage": 2})
    df = (
        df.assign(_rank=rank)
        .sort_values(["_commit_version", "_rank"], kind="stable")
        .drop_duplicates(subset=[key], keep="last")
    )
    return pa.Table.from_pandas(
        df[[*schema.names, "_change_type"]], schema=schema.append(pa.field("_change_type", pa.string())),
        preserve_index=False,
    )  # fmt: skip


def load_snapshot(url: str, version: int | None, delta: bool | None):  # noqa: ANN201
    """``(version, share schema as Arrow, snapshot as an Arrow table)`` through the official connector."""
    import delta_sharing
    import pyarrow as pa

    if version is None:
        version = delta_sharing.get_table_version(url)
    schema = arrow_schema(delta_sharing.get_table_metadata(url).schema_string)
    df = delta_sharing.load_as_pandas(url, version=version, use_delta_format=delta)
    return version, schema, pa.Table.from_pandas(df, schema=schema, preserve_index=False)


def load_changes(url: str, last: int, delta: bool | None):  # noqa: ANN201
    """``(latest version, share schema, change-feed DataFrame or None when nothing is new)``."""
    import delta_sharing

    latest = delta_sharing.get_table_version(url)
    if latest <= last:
        return latest, None, None
    schema = arrow_schema(delta_sharing.get_table_metadata(url).schema_string)
    df = delta_sharing.load_table_changes_as_pandas(
        url, starting_version=last + 1, ending_version=latest, use_delta_format=delta
    )
    return latest, schema, df


def incremental(url: str, target: Path, key: str, delta: bool | None) -> dict[str, object]:
    from deltalake import DeltaTable

    state = json.loads(state_file(target).read_text())
    last = int(state["version"])
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
    columns = list(schema.names)
    values = {f"`{c}`": f"s.`{c}`" for c in columns}
    metrics = (
        DeltaTable(str(target))
        .merge(source, f"t.`{key}` = s.`{key}`", source_alias="s", target_alias="t")
        .when_matched_delete(predicate=f"NOT ({UPSERT})")
        .when_matched_update(updates=values, predicate=UPSERT)
        .when_not_matched_insert(updates=values, predicate=UPSERT)
        .execute()
    )
    timings["merge"] = time.monotonic() - mark
    state_file(target).write_text(json.dumps({"version": latest, "key": key}))
    counts = {
        k: metrics.get(k) for k in ("num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted")
    }
    return {"version": latest, "rows": rows, "net_keys": net, "timings": timings, **counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="peer pipeline: delta-sharing → pandas → deltalake MERGE")
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
    began = time.monotonic()
    if args.command == "bootstrap":
        result = bootstrap(url, args.target, args.version, args.key, args.delta_format or None)
    else:
        result = incremental(url, args.target, args.key, args.delta_format or None)
    result["seconds"] = time.monotonic() - began
    print(json.dumps({"pipeline": "peer", "command": args.command, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
