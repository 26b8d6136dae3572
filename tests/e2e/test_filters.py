"""Filtered replicas (``where``) and projections (``columns``) stay exact through changes.

The filters are chosen so that provider updates move rows out of them (``apply_random_commits``
sets ``name = 'updated'`` and doubles ``price``), that they hit nulls (``neq`` never matches a
NULL: SQL three-valued logic), and that one of them is on the partition column, so the engine
also prunes files by partition value.
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from support.e2e import Workspace
from support.engines import on_both_engines
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
    target_rows,
)

from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows

pytestmark = on_both_engines  # embedded Sail and Apache Spark + Delta

WHERE = [
    {"col": "name", "op": "neq", "val": "updated"},
    {"col": "region", "op": "neq", "val": "eu"},
    {"col": "price", "op": "lt", "val": 500000},
]
COLUMNS = ["qty", "amount", "day", "payload"]


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_filtered_and_projected_replicas_follow_random_commits(workspace: Workspace, partitioned: bool) -> None:
    for seed, table in enumerate(("m", "mp", "a", "s")):
        workspace.table(table, rows=40, partitioned=partitioned, seed=10 + seed)
    config = workspace.config(
        workspace.spec("m", where=WHERE),
        workspace.spec("mp", columns=COLUMNS, where=WHERE[:1]),
        workspace.spec("a", "append", where=WHERE, columns=COLUMNS),
        workspace.spec("s", "snapshot", where=WHERE[1:], columns=["name", "price"]),
    )
    syncer = workspace.syncer(config)
    bootstrap: dict[str, int] = {}
    for round_ in range(3):
        if round_:
            for offset, table in enumerate(("m", "mp", "a", "s")):
                workspace.commit(table, 4, seed=round_ * 10 + offset)
        for result in syncer.sync_all():
            assert result.outcome is TableOutcome.SYNCED, result.error
            bootstrap.setdefault(result.name, result.checkpoint_version or 0)
        m, mp, a, s = (workspace.path(t) for t in ("m", "mp", "a", "s"))
        assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m), where=WHERE)
        assert_merge_target_matches(
            mp, workspace.target("mp"), ["id"], source_version(mp), columns=COLUMNS, where=WHERE[:1]
        )
        assert_append_target_matches(
            a,
            workspace.target("a"),
            bootstrap_version=bootstrap[workspace.name("a")],
            end_version=source_version(a),
            columns=COLUMNS,
            where=WHERE,
        )
        assert_snapshot_target_matches(
            s, workspace.target("s"), source_version(s), columns=["name", "price"], where=WHERE[1:]
        )


def test_rows_moving_out_of_the_filter_are_deleted_and_nulls_never_match_neq(workspace: Workspace) -> None:
    path = workspace.table("m", rows=30, partitioned=False, seed=4)
    where = [{"col": "name", "op": "neq", "val": "gone"}]
    syncer = workspace.syncer(workspace.config(workspace.spec("m", where=where)))
    syncer.sync_all()
    source = read_rows(DeltaTable(str(path))).to_pylist()
    null_names = {r["id"] for r in source if r["name"] is None}
    assert null_names, "the sample must hold NULL names for this test to mean anything"
    kept = {r["id"] for r in target_rows(workspace.target("m"))}
    assert kept == {r["id"] for r in source} - null_names

    moving = sorted(kept)[:3]
    DeltaTable(str(path)).update(updates={"name": "'gone'"}, predicate=f"id IN ({', '.join(map(str, moving))})")
    back = sorted(null_names)[:1]  # a NULL name that gets a value moves *into* the filter
    DeltaTable(str(path)).update(updates={"name": "'back'"}, predicate=f"id = {back[0]}")
    syncer.sync_all()

    after = {r["id"] for r in target_rows(workspace.target("m"))}
    assert after == (kept - set(moving)) | set(back)
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path), where=where)


@pytest.mark.parametrize("mode", ["merge", "append", "snapshot"])
def test_a_filter_matching_nothing_yet_gives_an_empty_target_with_the_schema(workspace: Workspace, mode: str) -> None:
    path = workspace.table("e", rows=10, seed=7)
    where = [{"col": "region", "op": "eq", "val": "mars"}]  # a partition no file is in: all pruned
    syncer = workspace.syncer(workspace.config(workspace.spec("e", mode, where=where)))
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED

    target = DeltaTable(workspace.target("e"))
    assert read_rows(target).num_rows == 0
    assert {"id", "region", "payload"} <= set(target.schema().to_arrow().names)

    DeltaTable(str(path)).update(updates={"region": "'mars'"}, predicate="id <= 2")  # rows move in
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED
    version = source_version(path)
    if mode == "merge":
        assert_merge_target_matches(path, workspace.target("e"), ["id"], version, where=where)
    elif mode == "append":
        assert_append_target_matches(path, workspace.target("e"), bootstrap_version=0, end_version=version, where=where)
    else:
        assert_snapshot_target_matches(path, workspace.target("e"), version, where=where)
    assert len(target_rows(workspace.target("e"))) >= 2
