"""Deterministic provider workloads for the benchmark: one generator, parameterised by a :class:`Shape`.

A shape says which columns a table has (each a vectorised builder and a share of nulls), how
big it is, how it is partitioned and how its change versions look. ``build(SHAPES["narrow"])``
writes, with ``deltalake`` (so the change data feed files exist the way a real provider writes
them):

* versions ``0 .. base_commits-1``: ``rows`` rows (keys ``1..rows``) in a few large appends;
* then ``versions`` versions of mixed changes of about ``change_rows`` keys each:

  - ``append``  — ``change_rows`` new keys (``add`` files, no CDF files);
  - ``update``  — ``UPDATE … WHERE id BETWEEN a AND b`` over ``change_rows`` live keys, setting
    the shape's ``updates`` (pre- and postimages: twice as many change rows);
  - ``delete``  — ``DELETE … WHERE id BETWEEN a AND b`` over ``change_rows`` live keys;
  - ``merge``   — an upsert of ``change_rows`` source rows (``merge_existing_pct`` % existing
    keys scattered over the whole table, the rest new) with a conditional delete
    (``s.<column> < <value>``, the shape's ``merge_delete``).

The shapes (:data:`SHAPES`): ``narrow`` (5 columns, 3 partitions — the table issue 16 measured
from outside), ``wide-strings`` (14 string columns, unpartitioned), ``small`` (100 k rows: fixed
costs dominate) and ``M``/``L`` (one column per protocol primitive type, 1 M / 5 M rows).
``Shape.scaled(0.05)`` shrinks rows and changed keys alike, for smoke runs.

Everything random comes from one ``numpy`` generator seeded with ``seed``, rows are built with
vectorised numpy/pyarrow (no Python loops over rows). The result is cached under
``bench/data/<shape>-<rows>-<versions>v-<key>/`` where the key hashes every parameter (and
:data:`GENERATOR_VERSION`); a ``workload.json`` marker is written last, so an interrupted
generation is redone and a finished one is reused.

CLI: ``python -m bench.workload --shape narrow [--scale 0.05]`` (prints the workload description).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

GENERATOR_VERSION = 2
BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("SHARESYNC_BENCH_DATA", BENCH_DIR / "data"))
SHARE, SCHEMA = "bench", "sales"
KINDS = ("append", "update", "delete", "merge")
_EPOCH_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
_EPOCH_DAY = 19_723  # 2024-01-01
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")

Log = Callable[[str], object]
Builder = Callable[[np.random.Generator, np.ndarray], pa.Array]

# ---------------------------------------------------------------- column builders (vectorised)


def _choice(values: tuple[str, ...]) -> Builder:
    def build(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
        indices = pa.array(rng.integers(0, len(values), len(ids), dtype=np.int32))
        return pa.DictionaryArray.from_arrays(indices, pa.array(values)).cast(pa.string())

    return build


def _ints(low: int, high: int, dtype: type[np.integer]) -> Builder:
    return lambda rng, ids: pa.array(rng.integers(low, high, len(ids), dtype=dtype))


def _floats(low: float, high: float, decimals: int, dtype: type[np.floating] = np.float64) -> Builder:
    return lambda rng, ids: pa.array(np.round(rng.uniform(low, high, len(ids)), decimals).astype(dtype))


def _decimal(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    cents = rng.integers(-9_999_999, 10_000_000, len(ids)) / 100.0
    return pa.array(cents).cast(pa.decimal128(10, 2), safe=False)


def _label(words: tuple[str, ...], sep: str = "-") -> Builder:
    """``<word><sep><id>``: unique per key, like a name or an e-mail address."""
    word = _choice(words)
    return lambda rng, ids: pc.binary_join_element_wise(word(rng, ids), pc.cast(pa.array(ids), pa.string()), sep)


@functools.cache
def _vocabulary() -> tuple[str, ...]:
    rng = np.random.default_rng(12345)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    return tuple(bytes(letters[rng.integers(0, 26, int(rng.integers(2, 11)))]).decode() for _ in range(512))


def _text(words: int) -> Builder:
    """``words`` words from a 512-word vocabulary: free text, many distinct values."""

    def build(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
        pick = _choice(_vocabulary())
        return pc.binary_join_element_wise(*(pick(rng, ids) for _ in range(words)), " ")

    return build


def _hex(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    """32 random hex digits (a UUID without dashes): incompressible, never repeats."""
    n = len(ids)
    raw = np.frombuffer(rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    chars = np.empty((n, 32), dtype=np.uint8)
    chars[:, 0::2], chars[:, 1::2] = digits[raw >> 4], digits[raw & 15]
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(chars.tobytes()))


def _bytes(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    n = len(ids)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(rng.integers(0, 9, n, dtype=np.int32), out=offsets[1:])
    data = pa.py_buffer(rng.bytes(int(offsets[-1])))
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.tobytes()), data])


def _bools(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    return pa.array(rng.random(len(ids)) < 0.5)


def _days(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    return pa.array((_EPOCH_DAY + rng.integers(0, 366, len(ids))).astype(np.int32)).cast(pa.date32())


def _timestamps(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    micros = _EPOCH_US + rng.integers(0, 10**13, len(ids), dtype=np.int64)
    return pa.array(micros).cast(pa.timestamp("us", tz="UTC"))


# ---------------------------------------------------------------- shapes


@dataclass(frozen=True)
class Column:
    name: str
    build: Builder
    nulls: float = 0.0  # share of null values


@dataclass(frozen=True)
class Shape:
    """A provider table's columns, size and change pattern. The key is always ``id`` (int64)."""

    name: str  # CLI name (--shape)
    table: str  # table name prefix: <table>_<rows>
    rows: int
    versions: int
    change_rows: int  # keys per change version
    columns: tuple[Column, ...]  # after ``id``
    partition_by: tuple[str, ...]
    updates: Mapping[str, str]  # SET clause of the range updates
    merge_existing_pct: int  # share of a merge's source rows that hit existing keys
    merge_delete: tuple[str, float]  # matched rows with s.<column> < <value> are deleted
    deletion_vectors: bool = False  # written by Sail with deletion vectors (bench.dv_writer), no MERGEs
    merges: bool = True  # False: appends, range updates and range deletes only (the XL shapes)

    def scaled(self, factor: float) -> Shape:
        if factor == 1:
            return self
        return dataclasses.replace(
            self, rows=max(100, round(self.rows * factor)), change_rows=max(10, round(self.change_rows * factor))
        )

    def params(self) -> dict[str, object]:
        """What the generated data depends on (the cache key)."""
        return {
            "shape": self.name, "rows": self.rows, "versions": self.versions, "change_rows": self.change_rows,
            "partition_by": self.partition_by, "updates": dict(self.updates),
            "merge_existing_pct": self.merge_existing_pct, "merge_delete": self.merge_delete,
            **({"deletion_vectors": True} if self.deletion_vectors else {}),
            **({} if self.merges else {"merges": False}),
        }  # fmt: skip


_ALL_TYPES = (  # one column per protocol primitive type (sharesync.sync.server.samples.SAMPLE_SCHEMA)
    Column("region", _choice(("eu", "us", "apac", "latam", "mea"))),
    Column("qty", _ints(-1000, 1001, np.int32), 0.1),
    Column("small", _ints(-32768, 32768, np.int16), 0.1),
    Column("tiny", _ints(-128, 128, np.int8), 0.1),
    Column("price", _floats(-1e6, 1e6, 6), 0.1),
    Column("ratio", _floats(0, 1, 3, np.float32), 0.1),
    Column("amount", _decimal, 0.1),
    Column("name", _label(_WORDS), 0.1),
    Column("active", _bools, 0.1),
    Column("day", _days, 0.1),
    Column("updated_at", _timestamps, 0.1),
    Column("payload", _bytes, 0.1),
)
_ALL_TYPES_CHANGES = {
    "partition_by": ("region",),
    "updates": {"qty": "qty + 1", "name": "'updated'", "price": "price * 2"},
    "merge_existing_pct": 70,
    "merge_delete": ("qty", -900.0),
}

SHAPES: dict[str, Shape] = {  # name, table, rows, versions, change rows, columns, …
    "narrow": Shape(
        "narrow",
        "narrow",
        1_000_000,
        30,
        50_000,
        (
            Column("region", _choice(("eu", "us", "apac"))),
            Column("amount", _floats(0, 10_000, 2)),
            Column("status", _choice(("open", "paid", "shipped", "cancelled", "returned"))),
            Column("note", _text(4), 0.5),
        ),
        partition_by=("region",),
        updates={"amount": "amount * 1.1", "status": "'revised'"},
        merge_existing_pct=50,
        merge_delete=("amount", 500.0),
    ),
    "wide-strings": Shape(
        "wide-strings",
        "strings",
        500_000,
        30,
        25_000,
        (
            Column("country", _choice(tuple(f"C{i:02d}" for i in range(40)))),
            Column("currency", _choice(("EUR", "USD", "GBP", "JPY", "CHF", "BRL", "INR", "AUD"))),
            Column("channel", _choice(("web", "store", "phone", "partner", "marketplace"))),
            Column("status_code", _choice(("NEW", "OPEN", "HOLD", "PAID", "SHIPPED", "CLOSED")), 0.05),
            Column("customer", _label(_WORDS)),
            Column("email", _label(("ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal"), "@")),
            Column("city", _choice(tuple(f"city-{i}" for i in range(200))), 0.1),
            Column("sku", _label(("SKU", "ART", "REF"), "/")),
            Column("order_ref", _hex),
            Column("session_id", _hex, 0.2),
            Column("trace_id", _hex, 0.5),
            Column("description", _text(8), 0.1),
            Column("comment", _text(12), 0.3),
            Column("address", _text(5), 0.1),
            Column("amount", _floats(0, 10_000, 2)),
            Column("updated_at", _timestamps),
        ),
        partition_by=(),
        merge_existing_pct=50,
        merge_delete=("amount", 500.0),
        updates={"status_code": "'REVISED'", "comment": "concat(comment, ' (edited)')", "amount": "amount + 1"},
    ),
    "small": Shape("small", "orders", 100_000, 10, 5_000, _ALL_TYPES, **_ALL_TYPES_CHANGES),
    "M": Shape("M", "orders", 1_000_000, 30, 50_000, _ALL_TYPES, **_ALL_TYPES_CHANGES),
    "L": Shape("L", "orders", 5_000_000, 30, 50_000, _ALL_TYPES, **_ALL_TYPES_CHANGES),
    # M with deletion vectors, as Databricks shares tables by default (issue 12): deletes and
    # updates are DV commits, read by both pipelines through the delta response format.
    "dv": Shape("dv", "orders_dv", 1_000_000, 30, 50_000, _ALL_TYPES, deletion_vectors=True, **_ALL_TYPES_CHANGES),
}
# Issue 34, "incremental cost follows the change, not the table": narrow's columns at growing
# sizes, the same change volume at every size (10 versions × 50 k keys of appends, range updates
# and range deletes). Not in ``--shape all``; ``--shape xl`` = xl-1m, xl-5m, xl-20m (generating
# xl-20m takes ~4 min and ~1 GB).
for _rows, _label in ((1_000_000, "1m"), (5_000_000, "5m"), (10_000_000, "10m"), (20_000_000, "20m")):
    SHAPES[f"xl-{_label}"] = dataclasses.replace(
        SHAPES["narrow"], name=f"xl-{_label}", table="ranges", rows=_rows, versions=10, merges=False
    )
XL_SHAPES = tuple(name for name in SHAPES if name.startswith("xl-"))


def make_rows(shape: Shape, rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """Rows of ``shape`` for ``ids``; ``id`` is never null, every other column nullable."""
    ids = ids.astype(np.int64)
    arrays, fields = [pa.array(ids)], [pa.field("id", pa.int64(), nullable=False)]
    for column in shape.columns:
        values = column.build(rng, ids)
        if column.nulls:
            mask = pa.array(rng.random(len(ids)) < column.nulls)
            values = pc.if_else(mask, pa.scalar(None, values.type), values)
        arrays.append(values)
        fields.append(pa.field(column.name, values.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Workload:
    """A generated provider table and what is known about it."""

    shape: str
    name: str  # table name inside bench.sales
    root: Path  # provider root: ROOT/bench/sales/<name>
    rows: int
    versions: int
    change_rows: int
    seed: int
    base_commits: int
    start_version: int  # last base version: the incremental scenario starts here
    latest_version: int
    kinds: tuple[str, ...]  # the kind of each change version, in order
    live_rows: int  # rows at the latest version
    change_file_rows: int  # rows in the change feed of start+1..latest (what a sync reads)
    seconds: float  # generation time
    deletion_vectors: bool = False

    @property
    def table_path(self) -> Path:
        return self.root / SHARE / SCHEMA / self.name

    @property
    def full_name(self) -> str:
        return f"{SHARE}.{SCHEMA}.{self.name}"


def _live_range(rng: np.random.Generator, live: np.ndarray, count: int) -> tuple[int, int, np.ndarray]:
    """A contiguous key range holding ``count`` live keys: (low, high, keys in it)."""
    count = min(count, len(live))
    start = int(rng.integers(0, len(live) - count + 1))
    chosen = live[start : start + count]
    return int(chosen[0]), int(chosen[-1]), chosen


def _kinds(rng: np.random.Generator, versions: int, merges: bool = True) -> list[str]:
    """A fixed, balanced mix (the table stays about ``rows`` big), in a seeded order."""
    share = {"append": 0.2, "update": 0.27, "delete": 0.27, "merge": 0.26}
    if not merges:
        share = {"append": 0.2, "update": 0.4, "delete": 0.4, "merge": 0.0}
    counts = {k: int(round(versions * share[k])) for k in KINDS}
    counts["update"] += versions - sum(counts.values())
    kinds = [k for k in KINDS for _ in range(counts[k])]
    return [kinds[i] for i in rng.permutation(len(kinds))]


def _generate(path: Path, shape: Shape, seed: int, base_commits: int, log: Log) -> tuple[list[str], int]:
    from deltalake import DeltaTable, write_deltalake

    rng = np.random.default_rng(seed)
    rows, change_rows = shape.rows, shape.change_rows
    per_commit = -(-rows // base_commits)
    for i in range(base_commits):
        ids = np.arange(i * per_commit + 1, min((i + 1) * per_commit, rows) + 1, dtype=np.int64)
        write_deltalake(
            str(path), make_rows(shape, rng, ids), mode="append", partition_by=list(shape.partition_by) or None,
            configuration={"delta.enableChangeDataFeed": "true"} if i == 0 else None,
        )  # fmt: skip
        log(f"  base commit {i + 1}/{base_commits}: {len(ids):,} rows")
    live = np.arange(1, rows + 1, dtype=np.int64)  # sorted live keys
    next_id = rows + 1
    kinds = _kinds(rng, shape.versions, shape.merges)
    delete_column, delete_below = shape.merge_delete
    for number, kind in enumerate(kinds, 1):
        began = time.monotonic()
        dt = DeltaTable(str(path))
        if kind == "append":
            ids = np.arange(next_id, next_id + change_rows, dtype=np.int64)
            next_id += change_rows
            write_deltalake(str(path), make_rows(shape, rng, ids), mode="append")
            live = np.concatenate([live, ids])
        elif kind == "update":
            low, high, _ = _live_range(rng, live, change_rows)
            dt.update(updates=dict(shape.updates), predicate=f"id >= {low} AND id <= {high}")
        elif kind == "delete":
            low, high, gone = _live_range(rng, live, change_rows)
            dt.delete(f"id >= {low} AND id <= {high}")
            live = np.setdiff1d(live, gone, assume_unique=True)
        else:  # merge
            hits = min(len(live), change_rows * shape.merge_existing_pct // 100)
            existing = np.sort(rng.choice(live, size=hits, replace=False))
            fresh = np.arange(next_id, next_id + change_rows - len(existing), dtype=np.int64)
            next_id += len(fresh)
            source = make_rows(shape, rng, np.concatenate([existing, fresh]))
            (
                dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_delete(predicate=f"s.{delete_column} < {delete_below:g}")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            below = pc.less(source.column(delete_column).slice(0, len(existing)), delete_below)
            deleted = existing[np.asarray(pc.fill_null(below, False))]
            live = np.setdiff1d(np.concatenate([live, fresh]), deleted, assume_unique=True)
        log(f"  change {number}/{len(kinds)}: {kind:<6} ({time.monotonic() - began:.1f} s), {len(live):,} live rows")
    return kinds, len(live)


def _change_file_rows(path: Path, start: int, end: int) -> int:
    """Rows in the change feed of versions ``start..end`` (deltalake's CDF reader)."""
    from deltalake import DeltaTable

    reader = DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end, columns=["id"])
    return sum(batch.num_rows for batch in reader)


def build(
    shape: Shape, seed: int = 7, base_commits: int = 4, *, data_dir: Path = DATA_DIR, log: Log = print
) -> Workload:
    """The workload for this shape: generated once, then read from the cache."""
    text = json.dumps({"generator": GENERATOR_VERSION, "seed": seed, "base": base_commits, **shape.params()},
                      sort_keys=True)  # fmt: skip
    key = hashlib.sha256(text.encode()).hexdigest()[:12]
    directory = data_dir / f"{shape.name}-{shape.rows}-{shape.versions}v-{key}"
    marker = directory / "workload.json"
    if marker.is_file():
        raw = json.loads(marker.read_text())
        return Workload(**{**raw, "root": Path(raw["root"]), "kinds": tuple(raw["kinds"])})
    shutil.rmtree(directory, ignore_errors=True)
    root = directory / "provider"
    name = f"{shape.table}_{shape.rows}"
    path = root / SHARE / SCHEMA / name
    path.parent.mkdir(parents=True)
    log(f"generating {shape.name} ({name}): {shape.rows:,} rows + {shape.versions} versions × "
        f"~{shape.change_rows:,} changed keys (seed {seed}) …")  # fmt: skip
    began = time.monotonic()
    start, latest = base_commits - 1, base_commits - 1 + shape.versions
    if shape.deletion_vectors:
        from bench import dv_writer

        kinds, live_rows, change_rows = dv_writer.generate(path, shape, seed, base_commits, log)
    else:
        kinds, live_rows = _generate(path, shape, seed, base_commits, log)
        change_rows = _change_file_rows(path, start + 1, latest)
    workload = Workload(
        shape.name, name, root, shape.rows, shape.versions, shape.change_rows, seed, base_commits, start, latest,
        tuple(kinds), live_rows, change_rows, round(time.monotonic() - began, 1), shape.deletion_vectors,
    )  # fmt: skip
    _truncated_copy(path, start_root(workload) / SHARE / SCHEMA / name, start)
    marker.write_text(json.dumps({**asdict(workload), "root": str(root)}, indent=2) + "\n")
    log(f"generated in {workload.seconds:.1f} s: {live_rows:,} rows at v{latest}, "
        f"{workload.change_file_rows:,} change rows in v{start + 1}..v{latest}")  # fmt: skip
    return workload


def provider_table(workload: Workload) -> pa.Table:
    """The provider's table at its latest version, sorted by key: what every target must equal."""
    if workload.deletion_vectors:
        from bench import dv_writer

        schema = make_rows(SHAPES[workload.shape], np.random.default_rng(0), np.arange(1, 2)).schema
        return dv_writer.read_provider(workload.table_path, schema).sort_by("id")
    from deltalake import DeltaTable

    return DeltaTable(str(workload.table_path)).to_pyarrow_table().sort_by("id")


def start_root(workload: Workload) -> Path:
    """A provider root whose table stops at the start version (same table id, same files).

    Used once per scenario to bootstrap sharesync and the peer at the start version, so the
    measured incremental runs begin from a target and a checkpoint at exactly that version.
    """
    return workload.root.parent / "provider_at_start"


def _truncated_copy(source: Path, dest: Path, last_version: int) -> None:
    """``source`` as of ``last_version``: the log up to it, data files hard-linked (no copy)."""
    shutil.rmtree(dest, ignore_errors=True)
    for directory, _, files in os.walk(source):
        relative = Path(directory).relative_to(source)
        (dest / relative).mkdir(parents=True, exist_ok=True)
        for file in files:
            if relative.parts[:1] == ("_delta_log",):
                stem = file.split(".")[0]
                if not (stem.isdigit() and int(stem) <= last_version and file.endswith(".json")):
                    continue
                shutil.copy2(Path(directory) / file, dest / relative / file)
            else:
                os.link(Path(directory) / file, dest / relative / file)


# ---------------------------------------------------------------- 1,000 tiny tables for polling


def build_poll_tables(count: int = 1000, *, data_dir: Path = DATA_DIR, log: Log = print) -> Path:
    """A provider root with ``count`` tiny tables ``poll.s.t0000…``; returns the root."""
    from deltalake import write_deltalake

    directory = data_dir / f"poll-{count}-g{GENERATOR_VERSION}"
    root = directory / "provider"
    marker = directory / "done"
    if marker.is_file():
        return root
    shutil.rmtree(directory, ignore_errors=True)
    log(f"generating {count} tiny tables for the polling scenario …")
    template = directory / "template"
    rows = make_rows(SHAPES["M"], np.random.default_rng(0), np.arange(1, 11, dtype=np.int64))
    write_deltalake(str(template), rows, configuration={"delta.enableChangeDataFeed": "true"})
    schema_dir = root / "poll" / "s"
    schema_dir.mkdir(parents=True)
    for i in range(count):
        shutil.copytree(template, schema_dir / poll_table(i))
    marker.write_text("ok\n")
    return root


def poll_table(i: int) -> str:
    return f"t{i:04d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="M", choices=list(SHAPES))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply rows and changed keys (smoke runs)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    workload = build(SHAPES[args.shape].scaled(args.scale), args.seed)
    print(json.dumps({**asdict(workload), "root": str(workload.root)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
