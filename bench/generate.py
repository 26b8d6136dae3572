"""Writing a workload's versions with ``deltalake`` (so the change data feed files exist the way a
real provider writes them):

* versions ``0 .. base_commits-1``: ``rows`` rows (keys ``1..rows``) in a few large appends;
* then ``versions`` versions of mixed changes of about ``change_rows`` keys each:

  - ``append``  — ``change_rows`` new keys (``add`` files, no CDF files);
  - ``update``  — ``UPDATE … WHERE id BETWEEN a AND b`` over ``change_rows`` live keys, setting
    the shape's ``updates`` (pre- and postimages: twice as many change rows);
  - ``delete``  — ``DELETE … WHERE id BETWEEN a AND b`` over ``change_rows`` live keys;
  - ``merge``   — an upsert of ``change_rows`` source rows (``merge_existing_pct`` % existing
    keys scattered over the whole table, the rest new) with a conditional delete
    (``s.<column> < <value>``, the shape's ``merge_delete``);
  - ``recent``  — a range update (as ``update``) among the newest 5 % of the live keys;
  - ``scatter`` — new values for ``change_rows`` existing keys drawn from the whole table (a
    MERGE that only updates).

Which kinds, in what order, is the shape's ``pattern`` (:data:`PATTERNS`): a seeded mix, or one
kind throughout.

Everything random comes from one ``numpy`` generator seeded with ``seed``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from bench.shapes import Shape, make_rows

KINDS = ("append", "update", "delete", "merge")
# A shape's pattern: the one kind of all its change versions (None: the seeded mix of kinds_of).
PATTERNS = {"mixed": None, "range-updates": "recent", "random-updates": "scatter", "appends": "append",
            "deletes": "delete"}  # fmt: skip
RECENT = 0.05  # "recent data": the newest 5 % of the live keys
Log = Callable[[str], object]


def live_range(rng: np.random.Generator, live: np.ndarray, count: int) -> tuple[int, int, np.ndarray]:
    """A contiguous key range holding ``count`` live keys: (low, high, keys in it)."""
    count = min(count, len(live))
    start = int(rng.integers(0, len(live) - count + 1))
    chosen = live[start : start + count]
    return int(chosen[0]), int(chosen[-1]), chosen


def kinds_of(rng: np.random.Generator, versions: int, merges: bool = True) -> list[str]:
    """A fixed, balanced mix (the table stays about ``rows`` big), in a seeded order."""
    share = {"append": 0.2, "update": 0.27, "delete": 0.27, "merge": 0.26}
    if not merges:
        share = {"append": 0.2, "update": 0.4, "delete": 0.4, "merge": 0.0}
    counts = {k: int(round(versions * share[k])) for k in KINDS}
    counts["update"] += versions - sum(counts.values())
    kinds = [k for k in KINDS for _ in range(counts[k])]
    return [kinds[i] for i in rng.permutation(len(kinds))]


def write_versions(path: Path, shape: Shape, seed: int, base_commits: int, log: Log) -> tuple[list[str], int]:
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
    one_kind = PATTERNS[shape.pattern]
    kinds = kinds_of(rng, shape.versions, shape.merges) if one_kind is None else [one_kind] * shape.versions
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
            low, high, _ = live_range(rng, live, change_rows)
            dt.update(updates=dict(shape.updates), predicate=f"id >= {low} AND id <= {high}")
        elif kind == "recent":
            newest = live[-max(change_rows, int(len(live) * RECENT)) :]
            low, high, _ = live_range(rng, newest, change_rows)
            dt.update(updates=dict(shape.updates), predicate=f"id >= {low} AND id <= {high}")
        elif kind == "scatter":
            chosen = np.sort(rng.choice(live, size=min(len(live), change_rows), replace=False))
            source = make_rows(shape, rng, chosen)
            dt.merge(source, "t.id = s.id", source_alias="s", target_alias="t").when_matched_update_all().execute()
        elif kind == "delete":
            low, high, gone = live_range(rng, live, change_rows)
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


def change_file_rows(path: Path, start: int, end: int) -> int:
    """Rows in the change feed of versions ``start..end`` (deltalake's CDF reader)."""
    from deltalake import DeltaTable

    reader = DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end, columns=["id"])
    return sum(batch.num_rows for batch in reader)
