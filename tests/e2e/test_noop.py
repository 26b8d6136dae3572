"""Nothing new at the provider: one ``/version`` call per table, no lease work, no engine."""

from __future__ import annotations

import subprocess
import sys

from support.e2e import Workspace, never_spark
from support.verify import (
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.run.results import TableOutcome


def test_nothing_new_asks_only_for_versions_and_never_starts_the_engine(workspace: Workspace) -> None:
    workspace.table("m", rows=10)
    workspace.table("s", rows=10, partitioned=False, seed=1)
    workspace.table("a", rows=10, seed=2)
    config = workspace.config(workspace.spec("m"), workspace.spec("s", "snapshot"), workspace.spec("a", "append"))
    first = workspace.syncer(config).sync_all()
    assert {r.outcome for r in first} == {TableOutcome.SYNCED}
    runs_before = {t.name: len(workspace.syncer(config).resources.store.runs_for(t.name)) for t in config.tables}

    client, transport = workspace.counting_client(config)
    idle = workspace.syncer(config, client=client, spark=never_spark)
    results = idle.sync_all()

    assert [r.outcome for r in results] == [TableOutcome.UP_TO_DATE] * 3
    assert all(r.batches == () and r.error is None for r in results)
    assert transport.endpoints == ["version"] * 3
    assert {t.name: len(idle.resources.store.runs_for(t.name)) for t in config.tables} == runs_before

    # The same holds table by table, and the engine really is the one that syncs otherwise.
    transport.requests.clear()
    assert idle.sync_table(workspace.name("m")).outcome is TableOutcome.UP_TO_DATE
    assert transport.endpoints == ["version"]
    workspace.commit("m", 1, seed=5)
    result = workspace.syncer(config).sync_table(workspace.name("m"))
    assert result.outcome is TableOutcome.SYNCED
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], source_version(workspace.path("m")))


def test_the_sync_command_imports_neither_spark_nor_dagster() -> None:
    """Importing what ``sharesync sync`` and ``status`` need must not pay for an engine."""
    code = (
        "import sys, sharesync.sync.cli.main, sharesync.sync.cli.syncing, sharesync.pipelines.run.sync_pass, sharesync.pipelines.commands.status; "
        "print(sorted(m for m in ('pyspark', 'pysail', 'dagster') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_changed_target_in_the_config_is_bootstrapped_not_skipped(workspace: Workspace) -> None:
    workspace.table("s", rows=10, partitioned=False)
    workspace.syncer(workspace.config(workspace.spec("s", "snapshot"))).sync_all()

    moved = workspace.spec("s", "snapshot", target="warehouse/s-moved")
    result = workspace.syncer(workspace.config(moved)).sync_table(workspace.name("s"))

    assert result.outcome is TableOutcome.SYNCED
    assert result.warnings, "moving a table to a new target deserves a word"
    assert_snapshot_target_matches(workspace.path("s"), str(workspace.root / "warehouse" / "s-moved"), 0)
