"""Deterministic provider workloads for the benchmark: a :class:`~bench.shapes.Shape` turned into a table.

``build(SHAPES["narrow"])`` writes the shape's table (:mod:`bench.generate`: base commits, then
mixed change versions), counts the change feed a sync reads, and keeps a copy of the table that
stops at the start version (:func:`start_root`). The result is cached under
``bench/data/<shape>-<rows>-<versions>v-<key>/`` where the key hashes every parameter (and
:data:`GENERATOR_VERSION`); a ``workload.json`` marker is written last, so an interrupted
generation is redone and a finished one is reused.

CLI: ``python -m bench.workload --shape narrow [--scale 0.05]`` (prints the workload description).
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

from bench import generate
from bench.generate import Log
from bench.shapes import SHAPES, Shape, make_rows

GENERATOR_VERSION = 2
BENCH_DIR = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("SHARESYNC_BENCH_DATA", BENCH_DIR / "data"))
SHARE, SCHEMA = "bench", "sales"


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
        kinds, live_rows = generate.write_versions(path, shape, seed, base_commits, log)
        change_rows = generate.change_file_rows(path, start + 1, latest)
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
