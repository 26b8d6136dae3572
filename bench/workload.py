"""Deterministic provider workload for the benchmark: a partitioned ``orders`` table with CDF on.

``build(rows=1_000_000, versions=30, change_rows=50_000, seed=7)`` writes

* versions ``0 .. base_commits-1``: ``rows`` rows (keys ``1..rows``) in a few large appends;
* then ``versions`` versions of mixed changes of about ``change_rows`` keys each, with
  ``deltalake`` so the change data feed files exist the way a real provider writes them:

  - ``append``  — ``change_rows`` new keys (``add`` files, no CDF files);
  - ``update``  — ``UPDATE … WHERE id BETWEEN a AND b`` over ``change_rows`` live keys
    (pre- and postimages: twice as many change rows);
  - ``delete``  — ``DELETE … WHERE id BETWEEN a AND b`` over ``change_rows`` live keys;
  - ``merge``   — an upsert of ``change_rows`` source rows (70 % existing keys scattered over
    the whole table, 30 % new ones) with a conditional delete (``s.qty < -900``).

Everything random comes from one ``numpy`` generator seeded with ``seed``, and rows are built
with vectorised numpy/pyarrow (no Python loops over rows), so M (1 M rows) takes well under a
minute and L (5 M) a few. The result is cached under ``bench/data/<key>/`` where the key hashes
every parameter (and :data:`GENERATOR_VERSION`); a ``workload.json`` marker is written last,
so an interrupted generation is redone, and a finished one is reused.

The schema is :data:`sharesync.sync.server.samples.SAMPLE_SCHEMA` (one column per protocol primitive type,
~10 % nulls in every column but ``id``); the partition column ``region`` is never null here.

CLI: ``python -m bench.workload --rows 1000000`` (prints the workload description).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

GENERATOR_VERSION = 1
BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("SHARESYNC_BENCH_DATA", BENCH_DIR / "data"))
SHARE, SCHEMA = "bench", "sales"
REGIONS = ("eu", "us", "apac", "latam", "mea")
KINDS = ("append", "update", "delete", "merge")
_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
_NULL_SHARE = 0.1
_EPOCH_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
_EPOCH_DAY = 19_723  # 2024-01-01


@dataclass(frozen=True)
class Workload:
    """A generated provider table and what is known about it."""

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

    @property
    def table_path(self) -> Path:
        return self.root / SHARE / SCHEMA / self.name

    @property
    def full_name(self) -> str:
        return f"{SHARE}.{SCHEMA}.{self.name}"


def _key(**params: object) -> str:
    text = json.dumps({"generator": GENERATOR_VERSION, **params}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def table_name(rows: int) -> str:
    return f"orders_{rows}"


# ---------------------------------------------------------------- rows


def _with_nulls(rng: np.random.Generator, values: pa.Array) -> pa.Array:
    mask = pa.array(rng.random(len(values)) < _NULL_SHARE)
    return pc.if_else(mask, pa.scalar(None, values.type), values)


def make_rows(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """Rows of ``SAMPLE_SCHEMA`` for ``ids``, vectorised; ~10 % nulls in every column but id/region."""
    from sharesync.sync.server.samples import SAMPLE_SCHEMA

    n = len(ids)
    id_array = pa.array(ids.astype(np.int64))
    region = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, len(REGIONS), n, dtype=np.int32)), pa.array(REGIONS)
    ).cast(pa.string())
    words = pa.DictionaryArray.from_arrays(
        pa.array(rng.integers(0, len(_WORDS), n, dtype=np.int32)), pa.array(_WORDS)
    ).cast(pa.string())
    name = pc.binary_join_element_wise(words, pc.cast(id_array, pa.string()), "-")
    lengths = rng.integers(0, 9, n, dtype=np.int32)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    payload = pa.BinaryArray.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(rng.bytes(int(offsets[-1])))]
    )
    columns = {
        "id": id_array,
        "region": region,
        "qty": _with_nulls(rng, pa.array(rng.integers(-1000, 1001, n, dtype=np.int32))),
        "small": _with_nulls(rng, pa.array(rng.integers(-32768, 32768, n, dtype=np.int16))),
        "tiny": _with_nulls(rng, pa.array(rng.integers(-128, 128, n, dtype=np.int8))),
        "price": _with_nulls(rng, pa.array(np.round(rng.uniform(-1e6, 1e6, n), 6))),
        "ratio": _with_nulls(rng, pa.array(np.round(rng.uniform(0, 1, n), 3).astype(np.float32))),
        "amount": _with_nulls(
            rng, pa.array(rng.integers(-9_999_999, 10_000_000, n) / 100.0).cast(pa.decimal128(10, 2), safe=False)
        ),
        "name": _with_nulls(rng, name),
        "active": _with_nulls(rng, pa.array(rng.random(n) < 0.5)),
        "day": _with_nulls(rng, pa.array((_EPOCH_DAY + rng.integers(0, 366, n)).astype(np.int32)).cast(pa.date32())),
        "updated_at": _with_nulls(
            rng,
            pa.array(_EPOCH_US + rng.integers(0, 10**13, n, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
        ),
        "payload": _with_nulls(rng, payload),
    }
    return pa.table(columns).cast(SAMPLE_SCHEMA)


# ---------------------------------------------------------------- the table


def _live_range(rng: np.random.Generator, live: np.ndarray, count: int) -> tuple[int, int, np.ndarray]:
    """A contiguous key range holding ``count`` live keys: (low, high, keys in it)."""
    count = min(count, len(live))
    start = int(rng.integers(0, len(live) - count + 1))
    chosen = live[start : start + count]
    return int(chosen[0]), int(chosen[-1]), chosen


def _generate(path: Path, rows: int, versions: int, change_rows: int, seed: int, base_commits: int,
              log: callable) -> tuple[list[str], int]:  # type: ignore[valid-type]
    from deltalake import DeltaTable, write_deltalake

    rng = np.random.default_rng(seed)
    per_commit = -(-rows // base_commits)
    for i in range(base_commits):
        ids = np.arange(i * per_commit + 1, min((i + 1) * per_commit, rows) + 1, dtype=np.int64)
        write_deltalake(
            str(path),
            make_rows(rng, ids),
            mode="append",
            partition_by=["region"],
            configuration={"delta.enableChangeDataFeed": "true"} if i == 0 else None,
        )
        log(f"  base commit {i + 1}/{base_commits}: {len(ids):,} rows")
    live = np.arange(1, rows + 1, dtype=np.int64)  # sorted live keys
    next_id = rows + 1
    # A fixed, balanced mix (the table stays about ``rows`` big), in a seeded order.
    share = {"append": 0.2, "update": 0.27, "delete": 0.27, "merge": 0.26}
    counts = {k: int(round(versions * share[k])) for k in KINDS}
    counts["update"] += versions - sum(counts.values())
    kinds = [k for k in KINDS for _ in range(counts[k])]
    kinds = [kinds[i] for i in rng.permutation(len(kinds))]
    for number, kind in enumerate(kinds, 1):
        began = time.monotonic()
        dt = DeltaTable(str(path))
        if kind == "append":
            ids = np.arange(next_id, next_id + change_rows, dtype=np.int64)
            next_id += change_rows
            write_deltalake(str(path), make_rows(rng, ids), mode="append")
            live = np.concatenate([live, ids])
        elif kind == "update":
            low, high, _ = _live_range(rng, live, change_rows)
            dt.update(
                updates={"qty": "qty + 1", "name": "'updated'", "price": "price * 2"},
                predicate=f"id >= {low} AND id <= {high}",
            )
        elif kind == "delete":
            low, high, gone = _live_range(rng, live, change_rows)
            dt.delete(f"id >= {low} AND id <= {high}")
            live = np.setdiff1d(live, gone, assume_unique=True)
        else:  # merge
            existing = np.sort(rng.choice(live, size=min(len(live), change_rows * 7 // 10), replace=False))
            fresh = np.arange(next_id, next_id + change_rows - len(existing), dtype=np.int64)
            next_id += len(fresh)
            source = make_rows(rng, np.concatenate([existing, fresh]))
            (
                dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_delete(predicate="s.qty < -900")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            qty = source.column("qty").slice(0, len(existing))
            deleted = existing[np.asarray(pc.fill_null(pc.less(qty, -900), False))]
            live = np.setdiff1d(np.concatenate([live, fresh]), deleted, assume_unique=True)
        log(f"  change {number}/{versions}: {kind:<6} ({time.monotonic() - began:.1f} s), {len(live):,} live rows")
    return kinds, len(live)


def _change_file_rows(path: Path, start: int, end: int) -> int:
    """Rows in the change feed of versions ``start..end`` (deltalake's CDF reader)."""
    from deltalake import DeltaTable

    reader = DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end, columns=["id"])
    return sum(batch.num_rows for batch in reader)


def build(
    rows: int = 1_000_000,
    versions: int = 30,
    change_rows: int = 50_000,
    seed: int = 7,
    base_commits: int = 4,
    *,
    data_dir: Path = DATA_DIR,
    log: callable = print,  # type: ignore[valid-type]
) -> Workload:
    """The workload for these parameters: generated once, then read from the cache."""
    key = _key(rows=rows, versions=versions, change_rows=change_rows, seed=seed, base_commits=base_commits)
    directory = data_dir / f"orders-{rows}-{versions}v-{key}"
    marker = directory / "workload.json"
    if marker.is_file():
        raw = json.loads(marker.read_text())
        return Workload(**{**raw, "root": Path(raw["root"]), "kinds": tuple(raw["kinds"])})
    shutil.rmtree(directory, ignore_errors=True)
    root = directory / "provider"
    name = table_name(rows)
    path = root / SHARE / SCHEMA / name
    path.parent.mkdir(parents=True)
    log(f"generating {name}: {rows:,} rows + {versions} versions × ~{change_rows:,} changed keys (seed {seed}) …")
    began = time.monotonic()
    kinds, live_rows = _generate(path, rows, versions, change_rows, seed, base_commits, log)
    start, latest = base_commits - 1, base_commits - 1 + versions
    change_file_rows = _change_file_rows(path, start + 1, latest)
    workload = Workload(
        name, root, rows, versions, change_rows, seed, base_commits, start, latest, tuple(kinds), live_rows,
        change_file_rows, round(time.monotonic() - began, 1),
    )
    _truncated_copy(path, directory / "provider_at_start" / SHARE / SCHEMA / name, start)
    marker.write_text(json.dumps({**asdict(workload), "root": str(root)}, indent=2) + "\n")
    log(f"generated in {workload.seconds:.1f} s: {live_rows:,} rows at v{latest}, "
        f"{change_file_rows:,} change rows in v{start + 1}..v{latest}")
    return workload


def start_root(workload: Workload) -> Path:
    """A provider root whose ``orders`` stops at the start version (same table id, same files).

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


def build_poll_tables(count: int = 1000, *, data_dir: Path = DATA_DIR, log: callable = print) -> Path:  # type: ignore[valid-type]
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
    write_deltalake(str(template), make_rows(np.random.default_rng(0), np.arange(1, 11, dtype=np.int64)),
                    configuration={"delta.enableChangeDataFeed": "true"})
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
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--versions", type=int, default=30)
    parser.add_argument("--change-rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    workload = build(args.rows, args.versions, args.change_rows, args.seed)
    print(json.dumps({**asdict(workload), "root": str(workload.root)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
