"""Schema changes at the provider: additive ones evolve the target, breaking ones stop that table only."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import on_both_engines
from support.schema_changes import add_column, drop_column, retype_column
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store

pytestmark = on_both_engines  # embedded Sail and Apache Spark + Delta

MODES = {"m": "merge", "a": "append", "s": "snapshot"}


def test_an_added_column_evolves_every_mode(workspace: Workspace) -> None:
    for seed, table in enumerate(MODES):
        workspace.table(table, rows=15, seed=seed)
    config = workspace.config(*(workspace.spec(t, mode) for t, mode in MODES.items()))
    syncer = workspace.syncer(config)
    first = {r.name: r.checkpoint_version for r in syncer.sync_all()}
    for seed, table in enumerate(MODES):
        workspace.commit(table, 2, seed=seed)
        add_column(str(workspace.path(table)), seed)

    results = syncer.sync_all()

    assert [r.outcome for r in results] == [TableOutcome.SYNCED] * 3, [r.error for r in results]
    m, a, s = (workspace.path(t) for t in MODES)
    for table in MODES:
        assert "note" in DeltaTable(workspace.target(table)).schema().to_arrow().names
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m))
    assert_append_target_matches(
        a, workspace.target("a"), bootstrap_version=first[workspace.name("a")], end_version=source_version(a)
    )
    assert_snapshot_target_matches(s, workspace.target("s"), source_version(s))


@pytest.mark.parametrize("mode", ["merge", "append", "snapshot"])
def test_a_breaking_change_fails_that_table_only_and_reset_recovers(
    workspace: Workspace, mode: str, cli: Callable[..., CliResult]
) -> None:
    workspace.table("dropped", rows=12, partitioned=False, seed=1)
    workspace.table("retyped", rows=12, partitioned=False, seed=2)
    workspace.table("fine", rows=12, seed=3)
    config = workspace.config(
        workspace.spec("dropped", mode), workspace.spec("retyped", mode), workspace.spec("fine", "merge")
    )
    syncer = workspace.syncer(config)
    assert {r.outcome for r in syncer.sync_all()} == {TableOutcome.SYNCED}
    before = {c.name: c.version for c in syncer.resources.store.list_checkpoints()}
    drop_column(str(workspace.path("dropped")))
    retype_column(str(workspace.path("retyped")))
    workspace.commit("fine", 3, seed=4)

    run = cli("--config", str(workspace.config_file), "sync")
    assert run.code == 1

    after = {c.name: c.version for c in syncer.resources.store.list_checkpoints()}
    assert after[workspace.name("dropped")] == before[workspace.name("dropped")]
    assert after[workspace.name("retyped")] == before[workspace.name("retyped")]
    fine = workspace.path("fine")
    assert after[workspace.name("fine")] == source_version(fine)
    assert_merge_target_matches(fine, workspace.target("fine"), ["id"], source_version(fine))
    runs = syncer.resources.store.latest_runs([workspace.name("dropped"), workspace.name("retyped")])
    assert "'qty'" in (runs[workspace.name("dropped")].error or "")
    assert "'small'" in (runs[workspace.name("retyped")].error or "")
    for table, column in (("dropped", "qty"), ("retyped", "small")):
        line = next(x for x in run.err.splitlines() if x.startswith(f"error: {workspace.name(table)}:"))
        assert "breaking schema change" in line and f"'{column}'" in line and "sharesync reset" in line

    # The way out the error names: reset, then the next sync re-bootstraps with the new schema.
    for table in ("dropped", "retyped"):
        assert cli("--config", str(workspace.config_file), "reset", workspace.name(table)).code == 0
    results = {r.name: r for r in syncer.sync_all()}
    for table in ("dropped", "retyped"):
        result = results[workspace.name(table)]
        assert result.outcome is TableOutcome.SYNCED, result.error
        path, target = workspace.path(table), workspace.target(table)
        if mode == "merge":
            assert_merge_target_matches(path, target, ["id"], source_version(path))
        elif mode == "append":  # the log is kept (issue 40 §1.3): the snapshot lands after it
            latest = source_version(path)
            above = before[workspace.name(table)]
            assert_append_target_matches(path, target, bootstrap_version=latest, end_version=latest, above=above)
            assert any(v <= above for v in read_rows(DeltaTable(target))["_commit_version"].to_pylist())
        else:
            assert_snapshot_target_matches(path, target, source_version(path))


def test_a_configured_column_that_older_versions_lack_stops_the_table_before_any_download(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    workspace.table("t", rows=10, seed=5)
    add_column(str(workspace.path("t")), 5)  # 'note' exists from version 1 on
    workspace.config(workspace.spec("t", columns=["qty", "note"], start={"version": 0}))

    run = cli("--config", str(workspace.config_file), "sync")

    assert run.code == 2, run.err
    [line] = [x for x in run.err.splitlines() if x.startswith("error:")]
    name = workspace.name("t")
    assert f"tables[{name}].columns: ['note'] not in the shared table's columns at version 0" in line
    assert "fix 'columns' in the config" in line
    assert not [p for p in (workspace.root / "staging").rglob("*") if p.is_file()]  # nothing downloaded
    assert not (workspace.root / "warehouse" / "t").exists()
    [attempt] = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}").runs_for(name)
    assert attempt.status.value == "failed" and "'note'" in (attempt.error or "")
