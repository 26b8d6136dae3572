"""Provider tables with deletion vectors and column mapping, written by Sail and read back by Sail.

``deltalake`` cannot read deletion-vector (DV) tables, so the oracle here reads the source with
the embedded Sail engine — a Delta reader that shares no code with sharesync's staging — and the
targets (which sharesync keeps free of DVs) with ``deltalake``, as :mod:`support.verify` does.

The tables hold every sample type plus a ``timestamp_ntz`` column. Sail's DELETE and UPDATE on a
DV table are DV commits (the data file removed and re-added with a DV; an update appends the new
rows too), so every commit changes exactly the rows it names: the change rows of a version are
the difference between the snapshots before and after it, which is what an append target must hold.

Crafted, because Sail cannot write them: change data feed (Sail refuses to write a table that has
it, so each Sail commit runs with it taken out of the log's metadata and put back after, see
:func:`sharesync.sync.server.samples.enable_change_data_feed`), and two kinds of ``metaData``
commit, as no available writer makes them (Sail has no ALTER TABLE, ``deltalake`` refuses to
write or read a table with type widening): a column renamed under the same physical name, and
columns widened (``typeWidening``, Delta PROTOCOL.md "Type Widening").
"""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.server.samples import KEY, PARTITION_COLUMN, enable_change_data_feed, sample_rows

NTZ = "local_at"  # a wall-clock timestamp: Delta type timestamp_ntz (reader feature timestampNtz)
CHANGE = ("_change_type", "_commit_version")
Row = dict[str, Any]


def feature_rows(rng: random.Random, ids: list[int]) -> pa.Table:
    rows = sample_rows(rng, ids)
    local = [datetime(2024, 6, 1) + timedelta(seconds=rng.randint(0, 10**7)) if rng.random() > 0.1 else None
             for _ in ids]  # fmt: skip
    return rows.append_column(pa.field(NTZ, pa.timestamp("us")), pa.array(local, pa.timestamp("us")))


def create_source(
    spark: Any, path: Path, *, dvs: bool, mapping: bool, partitioned: bool, rows: int = 30, seed: int = 0
) -> Path:
    """Version 0, written by Sail, with change data feed crafted on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _frame(spark, feature_rows(random.Random(seed), list(range(1, rows + 1)))) as frame:
        writer = frame.write.format("delta")
        if dvs:
            writer = writer.option("delta.enableDeletionVectors", "true")
        if mapping:
            writer = writer.option("delta.columnMapping.mode", "name")
        if partitioned:
            writer = writer.partitionBy(PARTITION_COLUMN)
        writer.save(str(path))
    enable_change_data_feed(path)
    return path


def commit(spark: Any, path: Path, rng: random.Random, n: int) -> list[str]:
    """``n`` Sail commits cycling append, DV delete, DV update (update = DV delete + append)."""
    location = f"delta.`{path}`"
    done: list[str] = []
    with cdf_paused(path):
        for index in range(n):
            ids = sorted(int(r[KEY]) for r in spark.read.format("delta").load(str(path)).select(KEY).collect())
            kind = ("append", "delete", "update")[index % 3] if len(ids) > 3 else "append"
            if kind == "append":
                start = max(ids, default=0) + 1
                fresh = feature_rows(rng, list(range(start, start + rng.randint(1, 4))))
                with _frame(spark, fresh) as frame:
                    frame.write.format("delta").mode("append").save(str(path))
            else:
                chosen = ", ".join(str(i) for i in rng.sample(ids, k=rng.randint(1, 3)))
                if kind == "delete":
                    spark.sql(f"DELETE FROM {location} WHERE {KEY} IN ({chosen})")
                else:
                    spark.sql(
                        f"UPDATE {location} SET qty = coalesce(qty, 0) + 1, name = 'updated' WHERE {KEY} IN ({chosen})"
                    )
            done.append(kind)
    return done


@contextmanager
def _frame(spark: Any, rows: pa.Table) -> Iterator[Any]:
    """``rows`` as a DataFrame, through a parquet file: Spark reads a zone-less Arrow timestamp
    from parquet as ``timestamp_ntz`` (``createDataFrame`` would make it an instant), and a read
    needs no active session (another suite's ``stop()`` may have cleared it)."""
    with tempfile.TemporaryDirectory(prefix="sharesync-rows-") as tmp:
        file = Path(tmp) / "rows.parquet"
        pq.write_table(rows, file)
        yield spark.read.parquet(str(file))


@contextmanager
def cdf_paused(path: Path) -> Iterator[None]:
    """Change data feed out of every ``metaData`` and ``protocol`` action while Sail writes."""
    originals: dict[Path, str] = {}
    for commit_file in sorted((path / "_delta_log").glob("*.json")):
        original = commit_file.read_text(encoding="utf-8")
        actions = [json.loads(line) for line in original.splitlines() if line.strip()]
        if not any("metaData" in a or "protocol" in a for a in actions):
            continue
        for action in actions:
            if "metaData" in action:
                action["metaData"].get("configuration", {}).pop("delta.enableChangeDataFeed", None)
            if "protocol" in action and "changeDataFeed" in action["protocol"].get("writerFeatures", []):
                action["protocol"]["writerFeatures"].remove("changeDataFeed")
        originals[commit_file] = original
        commit_file.write_text("".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions), encoding="utf-8")
    try:
        yield
    finally:
        for commit_file, original in originals.items():
            commit_file.write_text(original, encoding="utf-8")
        for crc in (path / "_delta_log").glob("*.crc"):  # they describe the log with CDF paused
            crc.unlink()


def rename_column(path: Path, old: str, new: str) -> int:
    """Craft a commit that renames ``old`` to ``new`` (column mapping keeps the physical name)."""
    metadata = _newest(path, "metaData")
    schema = json.loads(metadata["schemaString"])
    (field,) = [f for f in schema["fields"] if f["name"] == old]
    field["name"] = new
    metadata = {**metadata, "schemaString": json.dumps(schema, separators=(",", ":"))}
    return _craft(path, "RENAME COLUMN", {"metaData": metadata})


def widen_columns(path: Path, types: dict[str, str]) -> int:
    """Craft the commit Databricks writes for ``ALTER TABLE … ALTER COLUMN c TYPE t``: each column
    gets its wider type and a ``delta.typeChanges`` entry, the protocol the ``typeWidening``
    reader and writer feature. Files written before keep their narrower types."""
    metadata = _newest(path, "metaData")
    schema = json.loads(metadata["schemaString"])
    for field in schema["fields"]:
        if field["name"] in types:
            change = {"fromType": field["type"], "toType": types[field["name"]]}
            field["metadata"] = {**field.get("metadata", {}), "delta.typeChanges": [change]}
            field["type"] = types[field["name"]]
    configuration = {**metadata.get("configuration", {}), "delta.enableTypeWidening": "true"}
    metadata = {**metadata, "schemaString": json.dumps(schema, separators=(",", ":")), "configuration": configuration}
    protocol = _newest(path, "protocol")
    assert protocol["minReaderVersion"] == 3 and protocol["minWriterVersion"] == 7, protocol  # table features
    features = {k: sorted({*protocol.get(k, []), "typeWidening"}) for k in ("readerFeatures", "writerFeatures")}
    return _craft(path, "CHANGE COLUMN", {"protocol": {**protocol, **features}}, {"metaData": metadata})


def _newest(path: Path, kind: str) -> dict[str, Any]:
    found: dict[str, Any] | None = None
    for v in range(latest_version(path) + 1):
        for line in (path / "_delta_log" / f"{v:020d}.json").read_text(encoding="utf-8").splitlines():
            action = json.loads(line) if line.strip() else {}
            found = action[kind] if kind in action else found
    assert found is not None, f"no {kind} action in {path}"
    return found


def _craft(path: Path, operation: str, *actions: dict[str, Any]) -> int:
    version = latest_version(path) + 1
    info = {"timestamp": int(datetime.now().timestamp() * 1000), "operation": operation}
    lines = [json.dumps({"commitInfo": info}), *(json.dumps(a) for a in actions)]
    (path / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return version


def latest_version(path: Path) -> int:
    return max(int(p.name.split(".")[0]) for p in (path / "_delta_log").glob("*.json"))


# ---------------------------------------------------------------- the oracle


def read_source(spark: Any, path: Path, version: int, schema: pa.Schema | None = None) -> pa.Table:
    """The source at ``version`` as Sail reads it; ``schema``: cast to a later (widened) schema."""
    frame = spark.read.format("delta").option("versionAsOf", version).load(str(path))
    table = _normalise(frame.toArrow())
    return table if schema is None else table.select(schema.names).cast(schema)


def read_target(path: str | Path, *, current: bool = False) -> pa.Table:
    """The target's data columns; ``current``: a history target's open rows only."""
    where = '"_sharesync_is_current"' if current else None
    table = _normalise(read_rows(DeltaTable(str(path)), where=where))  # targets may hold deletion vectors
    return table.select([c for c in table.column_names if not c.startswith("_sharesync")])


def assert_merge_matches(spark: Any, source: Path, target: str, version: int) -> None:
    """One target row per key, equal to the source row at ``version``; same columns and types."""
    expected, actual = read_source(spark, source, version), read_target(target)
    _assert_types(expected, actual, target)
    want = {r[KEY]: r for r in expected.to_pylist()}
    got: dict[Any, Row] = {}
    for row in actual.to_pylist():
        assert row[KEY] not in got, f"target {target} holds key {row[KEY]} twice"
        got[row[KEY]] = row
    assert sorted(got) == sorted(want), f"{target} keys differ from {source}@{version}"
    differ = [k for k in want if want[k] != got[k]]
    assert not differ, f"{target} rows differ from {source}@{version}: {[(want[k], got[k]) for k in differ[:3]]}"


def assert_snapshot_matches(spark: Any, source: Path, target: str, version: int) -> None:
    expected, actual = read_source(spark, source, version), read_target(target)
    _assert_types(expected, actual, target)
    names = sorted(expected.column_names)
    assert _multiset(actual.to_pylist(), names) == _multiset(expected.to_pylist(), names), (
        f"{target} != {source}@{version}"
    )


def assert_append_matches(spark: Any, source: Path, target: str, bootstrap: int, end: int) -> None:
    """Each change row once: the bootstrap snapshot as inserts, then each version's snapshot
    difference; every version read in ``end``'s schema (older rows as a widened column holds them)."""
    schema = read_source(spark, source, end).schema
    snapshot = read_source(spark, source, bootstrap, schema)
    names = sorted(snapshot.column_names)
    expected = [{**r, "_change_type": "insert", "_commit_version": bootstrap} for r in snapshot.to_pylist()]
    before = _multiset(snapshot.to_pylist(), names)
    for version in range(bootstrap + 1, end + 1):
        after = _multiset(read_source(spark, source, version, schema).to_pylist(), names)
        for kind, rows in (("delete", before - after), ("insert", after - before)):
            expected += [{**dict(zip(names, row, strict=True)), "_change_type": kind, "_commit_version": version}
                         for row in rows.elements()]  # fmt: skip
        before = after
    actual = read_target(target).to_pylist()
    columns = [*names, *CHANGE]
    want, got = _multiset(expected, columns), _multiset(actual, columns)
    assert got == want, (
        f"{target}: missing {list((want - got).elements())[:3]}, unexpected {list((got - want).elements())[:3]}"
    )


def _multiset(rows: Sequence[Row], names: Sequence[str]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row[n] for n in names) for row in rows)


def _assert_types(expected: pa.Table, actual: pa.Table, target: str) -> None:
    want = {f.name: f.type for f in expected.schema}
    got = {f.name: f.type for f in actual.schema if f.name not in (*CHANGE, "_commit_timestamp")}
    assert got == want, f"target {target} columns/types differ:\n  expected {want}\n  actual   {got}"


def _normalise(table: pa.Table) -> pa.Table:
    """One spelling per type (views → plain, UTC zone names → ``UTC``), nullability ignored."""
    fields = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_string_view(kind) or pa.types.is_large_string(kind):
            kind = pa.string()
        elif pa.types.is_binary_view(kind) or pa.types.is_large_binary(kind):
            kind = pa.binary()
        elif pa.types.is_timestamp(kind) and kind.tz in ("Etc/UTC", "+00:00", "UTC"):
            kind = pa.timestamp(kind.unit, tz="UTC")
        fields.append(pa.field(field.name, kind, nullable=True))
    return table.cast(pa.schema(fields))


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    """Z85 the way Delta writes inline DVs (padded to whole groups): the tests' own encoder,
    independent of the decoder under test."""
    data += b"\0" * (-len(data) % 4)
    out = []
    for start in range(0, len(data), 4):
        value = int.from_bytes(data[start : start + 4], "big")
        out.append("".join(_Z85[(value // 85**power) % 85] for power in range(4, -1, -1)))
    return "".join(out)


def assert_current_rows_match(spark: Any, source: Path, target: str, version: int) -> None:
    """History mode: the target's current rows are the source at ``version``, one per key."""
    current = read_target(target, current=True)
    got = {r[KEY]: r for r in current.to_pylist()}
    want = {r[KEY]: r for r in read_source(spark, source, version).to_pylist()}
    assert len(got) == current.num_rows and got == want, f"{target} current rows differ from {source}@{version}"


def assert_mode_matches(spark: Any, source: Path, target: str, mode: str, bootstrap: int, version: int) -> None:
    """The promise of ``mode`` (docs/guarantees.md): what its target holds after syncing ``version``."""
    if mode == "merge":
        assert_merge_matches(spark, source, target, version)
    elif mode == "append":
        assert_append_matches(spark, source, target, bootstrap, version)
    elif mode == "snapshot":
        assert_snapshot_matches(spark, source, target, version)
    else:
        assert mode == "history", mode
        assert_current_rows_match(spark, source, target, version)
