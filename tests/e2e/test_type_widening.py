"""Type widening at the provider, end to end through ``sharesync sync`` (issue 32 §3).

The provider tables are written by Sail with narrow columns (``integer``, ``short``, ``date``)
and synced; then each is widened (``long``, ``integer``, ``timestamp_ntz``)
and Sail writes more commits in the wide types, some with values the narrow types cannot hold.
The widening commit is crafted (:func:`support.feature_tables.widen_columns`): no available
writer makes one — Sail has no ALTER TABLE, ``deltalake`` refuses type-widening tables. So the
synced versions hold files of both widths, and change feeds read narrow files (removed by later
updates) as well as wide ones. Every target must widen its columns, never fail and never narrow
a value; the oracle is Sail reading the source, every version cast to the latest schema.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import on_both_engines
from support.feature_tables import (
    assert_append_matches,
    assert_merge_matches,
    assert_snapshot_matches,
    cdf_paused,
    commit,
    create_source,
    latest_version,
    read_source,
    widen_columns,
)
from support.history import HistoryModel, assert_history_matches
from support.spark import get_spark

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store

pytestmark = on_both_engines  # embedded Sail and Apache Spark + Delta

# Not float -> double here: Sail, the oracle, reads a widened float 1 ulp off the exact double
# (0.952f as 0.9520000219345092, pyarrow's exact cast gives ...093); tests/sync/delta covers it.
WIDENED = {"qty": "long", "small": "integer", "day": "timestamp_ntz"}
NARROW = {"qty": "integer", "small": "short", "day": "date"}
# name: (column mapping, mode). Deletion vectors on everywhere: a DV update changes only its rows
# (a whole-file rewrite would serve unchanged rows as delete + insert, which a snapshot
# difference cannot predict), and its change rows come from the narrow files the DVs point into.
TABLES = {"m": (False, "merge"), "a": (True, "append"), "s": (False, "snapshot"), "h": (False, "history")}


def _types(target: str) -> dict[str, str]:
    fields = DeltaTable(target).schema().fields
    return {f.name: f.type.type for f in fields if f.name in WIDENED}


def _wide_values(spark: Any, path: Path) -> None:
    """A Sail UPDATE only the wide types can hold: qty past 2**31, a time of day on ``day``."""
    with cdf_paused(path):
        spark.sql(
            f"UPDATE delta.`{path}` SET qty = 5000000000 + id, day = timestamp_ntz'2025-03-04 05:06:07' WHERE id <= 3"
        )


def _history(spark: Any, path: Path, start: int, end: int) -> list[dict[str, Any]]:
    """What a history target must hold: Sail's snapshots in the latest schema, each version's
    difference applied to :class:`~support.history.HistoryModel` at its commit time."""
    schema = read_source(spark, path, end).schema
    model = HistoryModel(["id"], schema.names)
    stamps = _commit_times(path)
    before = read_source(spark, path, start, schema).to_pylist()
    model.snapshot(start, stamps[start], [{**r, "_change_type": "insert"} for r in before])
    for version in range(start + 1, end + 1):
        after = read_source(spark, path, version, schema).to_pylist()
        old, new = Counter(map(_frozen, before)), Counter(map(_frozen, after))
        changes = [{**dict(r), "_change_type": "delete"} for r in (old - new).elements()]
        changes += [{**dict(r), "_change_type": "insert"} for r in (new - old).elements()]
        model.apply_version(version, stamps[version], changes)
        before = after
    return model.sorted_rows()


def _frozen(row: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(row.items()))


def _commit_times(path: Path) -> dict[int, datetime]:
    """Each version's commitInfo timestamp (``deltalake`` cannot open a type-widening table)."""
    stamps = {}
    for version in range(latest_version(path) + 1):
        text = (path / "_delta_log" / f"{version:020d}.json").read_text(encoding="utf-8")
        info = next(json.loads(line)["commitInfo"] for line in text.splitlines() if '"commitInfo"' in line)
        stamps[version] = datetime.fromtimestamp(int(info["timestamp"]) / 1000, tz=UTC)
    return stamps


def test_every_mode_widens_its_target_when_the_provider_widens_a_column(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    spark = get_spark()
    for seed, (name, (mapping, _)) in enumerate(TABLES.items()):
        create_source(spark, workspace.path(name), dvs=True, mapping=mapping, partitioned=False, rows=20, seed=seed)
        commit(spark, workspace.path(name), random.Random(seed), 2)
    specs = [
        workspace.spec(n, mode, **({"keys": ["id"]} if mode == "history" else {})) for n, (*_, mode) in TABLES.items()
    ]
    workspace.config(*specs)
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    bootstrap = {name: latest_version(workspace.path(name)) for name in TABLES}
    for name in TABLES:
        assert _types(workspace.target(name)) == NARROW, name

    for seed, name in enumerate(TABLES):
        source = workspace.path(name)
        widen_columns(source, WIDENED)
        commit(spark, source, random.Random(10 + seed), 3)  # append, DV delete / rewrite, update
        _wide_values(spark, source)
    run = cli(*config, "sync")

    assert run.code == 0, run.out + run.err
    store = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")
    for name, (_, mode) in TABLES.items():
        source, target, version = workspace.path(name), workspace.target(name), latest_version(workspace.path(name))
        checkpoint = store.get_checkpoint(workspace.name(name))
        assert checkpoint is not None and checkpoint.version == version, (name, checkpoint)
        assert _types(target) == WIDENED, name
        if mode == "merge":
            assert_merge_matches(spark, source, target, version)
        elif mode == "append":
            assert_append_matches(spark, source, target, bootstrap[name], version)
        elif mode == "snapshot":
            assert_snapshot_matches(spark, source, target, version)
        else:
            assert_history_matches(target, _history(spark, source, bootstrap[name], version), ["id"])
        wide = [r for r in read_rows(DeltaTable(target)).to_pylist() if (r["qty"] or 0) > 2**31]
        assert wide and all(r["day"] == datetime(2025, 3, 4, 5, 6, 7) for r in wide), name  # nothing narrowed
        assert DeltaTable(target).metadata().configuration.get("delta.enableDeletionVectors") == "true", name
