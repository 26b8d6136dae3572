"""Deterministic sample provider tables: the data behind tests, ``sharesync demo`` and benchmarks.

Every table lives at ``ROOT/<share>/<schema>/<table>`` (the layout :mod:`sharesync.sync.server` serves)
and is written with ``deltalake``. The sample schema holds every primitive type the protocol
names, with nulls in every column but the key ``id``, so type handling is exercised end to end.
Change data feed is on unless asked otherwise, so updates, deletes and merges leave
``_change_data`` files behind, as a real provider's tables do. All randomness comes from a
caller's :class:`random.Random`, so the same seed gives the same rows and the same commits.

Tables with deletion vectors or column mapping (what modern providers write) come from the
embedded Sail engine instead, a writer other than sharesync (``deltalake`` writes neither):
:func:`create_feature_table` and :func:`apply_feature_commits`, with a session from
:func:`embedded_spark`. Sail cannot turn change data feed on, so :func:`enable_change_data_feed`
crafts it into the log afterwards (see there).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CDF_ON = {"delta.enableChangeDataFeed": "true"}
REGIONS = ("eu", "us", "apac")
KEY = "id"
PARTITION_COLUMN = "region"

# One column per protocol primitive type (spec "Primitive Types"); the Delta type is in the comment.
SAMPLE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),  # long (the key, never null)
        pa.field("region", pa.string()),  # string, the partition column when partitioned
        pa.field("qty", pa.int32()),  # integer
        pa.field("small", pa.int16()),  # short
        pa.field("tiny", pa.int8()),  # byte
        pa.field("price", pa.float64()),  # double
        pa.field("ratio", pa.float32()),  # float
        pa.field("amount", pa.decimal128(10, 2)),  # decimal(10,2)
        pa.field("name", pa.string()),  # string
        pa.field("active", pa.bool_()),  # boolean
        pa.field("day", pa.date32()),  # date
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),  # timestamp (UTC-adjusted)
        pa.field("payload", pa.binary()),  # binary
    ]
)

_NULL_SHARE = 0.1
_EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


@dataclass(frozen=True)
class SampleTable:
    """Where a sample table lives and how it was made (handy for assertions)."""

    share: str
    schema: str
    name: str
    path: Path
    partitioned: bool
    cdf: bool

    @property
    def full_name(self) -> str:
        return f"{self.share}.{self.schema}.{self.name}"


def table_path(root: Path | str, share: str, schema: str, name: str) -> Path:
    """The directory the server maps to ``share.schema.name``."""
    return Path(root) / share / schema / name


def sample_rows(rng: random.Random, ids: list[int]) -> pa.Table:
    """Rows of :data:`SAMPLE_SCHEMA` for the given keys; about one value in ten is null."""

    def maybe(value: object) -> object:
        return None if rng.random() < _NULL_SHARE else value

    columns: dict[str, list[object]] = {field.name: [] for field in SAMPLE_SCHEMA}
    for key in ids:
        columns["id"].append(key)
        columns["region"].append(maybe(rng.choice(REGIONS)))
        columns["qty"].append(maybe(rng.randint(-1000, 1000)))
        columns["small"].append(maybe(rng.randint(-32768, 32767)))
        columns["tiny"].append(maybe(rng.randint(-128, 127)))
        columns["price"].append(maybe(round(rng.uniform(-1e6, 1e6), 6)))
        columns["ratio"].append(maybe(round(rng.uniform(0, 1), 3)))
        columns["amount"].append(maybe(Decimal(rng.randint(-9_999_999, 9_999_999)).scaleb(-2)))
        columns["name"].append(maybe(f"{rng.choice(_WORDS)}-{key}"))
        columns["active"].append(maybe(rng.random() < 0.5))
        columns["day"].append(maybe(date(2024, 1, 1) + timedelta(days=rng.randint(0, 365))))
        columns["updated_at"].append(maybe(_EPOCH + timedelta(microseconds=rng.randint(0, 10**13))))
        columns["payload"].append(maybe(rng.randbytes(rng.randint(0, 8))))
    return pa.table(columns, schema=SAMPLE_SCHEMA)


def create_sample_table(
    path: Path | str,
    *,
    rows: int = 20,
    partitioned: bool = True,
    cdf: bool = True,
    seed: int = 0,
    description: str | None = None,
) -> Path:
    """Write version 0 of an all-types table (partitioned by ``region`` unless told otherwise)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(
        str(path),
        sample_rows(random.Random(seed), list(range(1, rows + 1))),
        partition_by=[PARTITION_COLUMN] if partitioned else None,
        configuration=CDF_ON if cdf else None,
        description=description,
    )
    return path


def create_cdf_disabled_table(path: Path | str, *, rows: int = 10, seed: int = 0) -> Path:
    """A table without change data feed: the server must refuse ``/changes`` and time travel on it."""
    path = create_sample_table(path, rows=rows, partitioned=False, cdf=False, seed=seed)
    # A second version so that version arguments have something to refer to.
    write_deltalake(str(path), sample_rows(random.Random(seed + 1), [rows + 1]), mode="append")
    return path


# ---------------------------------------------------------------- random commits


def _current_ids(dt: DeltaTable) -> list[int]:
    ids = dt.to_pyarrow_table(columns=[KEY]).column(KEY).to_pylist()
    return sorted(int(i) for i in ids)


def _id_range(rng: random.Random, ids: list[int]) -> tuple[int, int]:
    """A small contiguous key range that touches existing rows (a predicate that matches)."""
    low = rng.choice(ids)
    return low, low + rng.randint(1, 4)


def apply_random_commits(path: Path | str, rng: random.Random, n: int) -> list[str]:
    """Make ``n`` commits of mixed kinds and return their names, in order.

    Kinds: append, update, delete (row range), merge (upsert with a conditional delete) and,
    on partitioned tables, a whole-partition delete (which Delta records as plain file
    removals without change data, the case CDF readers must infer from ``remove`` files).
    An operation that would match nothing becomes an append, so every call adds ``n`` versions.
    """
    path = Path(path)
    done: list[str] = []
    for _ in range(n):
        dt = DeltaTable(str(path))
        partitioned = bool(dt.metadata().partition_columns)
        ids = _current_ids(dt)
        next_id = (ids[-1] if ids else 0) + 1
        kinds = ["append", "update", "delete", "merge"] + (["drop_partition"] if partitioned else [])
        kind = rng.choice(kinds) if ids else "append"
        if kind == "update":
            low, high = _id_range(rng, ids)
            dt.update(
                updates={"qty": "qty + 1", "name": "'updated'", "price": "price * 2"},
                predicate=f"id >= {low} AND id < {high}",
            )
        elif kind == "delete":
            low, high = _id_range(rng, ids)
            dt.delete(f"id >= {low} AND id < {high}")
        elif kind == "merge":
            existing = rng.sample(ids, k=min(len(ids), rng.randint(1, 3)))
            fresh = list(range(next_id, next_id + rng.randint(1, 3)))
            source = sample_rows(rng, existing + fresh)
            (
                dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_delete(predicate="s.qty < -900")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        elif kind == "drop_partition":
            present = dt.to_pyarrow_table(columns=[PARTITION_COLUMN]).column(PARTITION_COLUMN).drop_null()
            regions = sorted(set(present.to_pylist()))
            if regions:
                dt.delete(f"{PARTITION_COLUMN} = '{rng.choice(regions)}'")
            else:
                kind = "append"
        if kind == "append":
            fresh = list(range(next_id, next_id + rng.randint(1, 5)))
            write_deltalake(str(path), sample_rows(rng, fresh), mode="append")
        done.append(kind)
    return done


# ---------------------------------------------------------------- ready-made providers


def build_demo_provider(root: Path | str, *, seed: int = 7, commits: int = 6) -> list[SampleTable]:
    """The demo share ``demo.sales`` with ``orders`` (partitioned by region) and ``customers``.

    Both have change data feed and a short history of mixed commits, so a first sync
    bootstraps and a second one has changes to apply.
    """
    rng = random.Random(seed)
    orders = create_sample_table(table_path(root, "demo", "sales", "orders"), rows=30, seed=seed)
    apply_random_commits(orders, rng, commits)
    customers = create_sample_table(
        table_path(root, "demo", "sales", "customers"), rows=15, partitioned=False, seed=seed + 1
    )
    apply_random_commits(customers, rng, max(1, commits // 2))
    return [
        SampleTable("demo", "sales", "orders", orders, partitioned=True, cdf=True),
        SampleTable("demo", "sales", "customers", customers, partitioned=False, cdf=True),
    ]


# ---------------------------------------------------------------- deletion vectors, column mapping

DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}
COLUMN_MAPPING = {"delta.columnMapping.mode": "name"}


@contextmanager
def embedded_spark() -> Iterator[SparkSession]:
    """A Spark Connect session on an in-process Sail engine (imported here: few callers need it)."""
    from pysail.spark import SparkConnectServer
    from pyspark.sql import SparkSession

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    try:
        _, port = server.listening_address
        # create(), not getOrCreate(): the latter hands back another engine's cached session in a
        # process that already has one (the sync engine's), and stopping it here would kill that.
        spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
        try:
            yield spark
        finally:
            spark.stop()
    finally:
        server.stop()


def create_feature_table(
    spark: SparkSession,
    path: Path | str,
    *,
    deletion_vectors: bool = False,
    column_mapping: bool = False,
    rows: int = 20,
    partitioned: bool = False,
    seed: int = 0,
) -> Path:
    """Version 0 of an all-types table written by Sail with DVs and/or column mapping (``name``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = spark.createDataFrame(sample_rows(random.Random(seed), list(range(1, rows + 1)))).write.format("delta")
    for key, value in {
        **(DELETION_VECTORS if deletion_vectors else {}),
        **(COLUMN_MAPPING if column_mapping else {}),
    }.items():
        writer = writer.option(key, value)
    if partitioned:
        writer = writer.partitionBy(PARTITION_COLUMN)
    writer.save(str(path))
    return path


def apply_feature_commits(spark: SparkSession, path: Path | str, rng: random.Random, n: int) -> list[str]:
    """Make ``n`` Sail commits: appends, deletes and updates (on a DV table both are DV commits:
    the file is removed and re-added with a deletion vector, an update adds the new rows too)."""
    location = f"delta.`{Path(path)}`"
    done: list[str] = []
    offset = rng.randrange(3)  # every kind within any three commits, in an order the seed picks
    for index in range(n):
        ids = sorted(int(r[KEY]) for r in spark.read.format("delta").load(str(path)).select(KEY).collect())
        kind = ("append", "delete", "update")[(offset + index) % 3] if len(ids) > 2 else "append"
        if kind == "append":
            start = (ids[-1] if ids else 0) + 1
            fresh = sample_rows(rng, list(range(start, start + rng.randint(1, 4))))
            spark.createDataFrame(fresh).write.format("delta").mode("append").save(str(path))
        else:
            chosen = ", ".join(str(i) for i in rng.sample(ids, k=rng.randint(1, 2)))
            if kind == "delete":
                spark.sql(f"DELETE FROM {location} WHERE {KEY} IN ({chosen})")
            else:
                spark.sql(
                    f"UPDATE {location} SET qty = coalesce(qty, 0) + 1, name = 'updated' WHERE {KEY} IN ({chosen})"
                )
        done.append(kind)
    return done


def enable_change_data_feed(path: Path | str) -> None:
    """Turn change data feed on from version 0 by editing the log (crafted: Sail refuses to).

    Version 0's ``metaData`` gets ``delta.enableChangeDataFeed=true`` and its ``protocol`` the
    ``changeDataFeed`` writer feature, as if the table had been created with CDF on. Deletes and
    updates on a DV table then need no change-data files: readers derive the changed rows from
    the deletion vectors (Delta's own CDF reader does the same). Commit checksums (``.crc``) are
    dropped, since they describe the log as it was. Call it after the last Sail write.
    """
    log_dir = Path(path) / "_delta_log"
    first = log_dir / f"{0:020d}.json"
    lines = []
    for line in first.read_text(encoding="utf-8").splitlines():
        action = json.loads(line) if line.strip() else None
        if action and "metaData" in action:
            action["metaData"].setdefault("configuration", {})["delta.enableChangeDataFeed"] = "true"
        elif action and "protocol" in action and action["protocol"].get("minWriterVersion", 0) >= 7:
            features = action["protocol"].setdefault("writerFeatures", [])
            if "changeDataFeed" not in features:
                features.append("changeDataFeed")
        lines.append(json.dumps(action, separators=(",", ":")) if action else line)
    first.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for crc in log_dir.glob("*.crc"):
        crc.unlink()


def build_feature_provider(
    root: Path | str, *, seed: int = 11, commits: int = 5, spark: SparkSession | None = None
) -> list[SampleTable]:
    """Share ``features.modern`` with ``dv`` (deletion vectors), ``cm`` (column mapping, partitioned)
    and ``dv_cm`` (both), each with a short history of Sail commits and change data feed on."""
    if spark is None:
        with embedded_spark() as session:
            return build_feature_provider(root, seed=seed, commits=commits, spark=session)
    rng = random.Random(seed)
    made: list[SampleTable] = []
    kinds = (("dv", True, False, False), ("cm", False, True, True), ("dv_cm", True, True, True))
    for index, (name, dvs, mapping, partitioned) in enumerate(kinds):
        path = table_path(root, "features", "modern", name)
        create_feature_table(
            spark, path, deletion_vectors=dvs, column_mapping=mapping, partitioned=partitioned, seed=seed + index
        )
        apply_feature_commits(spark, path, rng, commits)
        made.append(SampleTable("features", "modern", name, path, partitioned=partitioned, cdf=True))
    for table in made:
        enable_change_data_feed(table.path)
    return made
