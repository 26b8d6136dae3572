"""When changes cannot be trusted the syncer re-bootstraps from a snapshot, and says so.

History gap (log cleanup or VACUUM at the provider), a re-created source table (new table
id, versions restart) and a source without change data feed. The warning reaches the
result, the run record and ``sharesync status``.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from deltalake import DeltaTable, write_deltalake
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    source_version,
)

from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.server.samples import create_sample_table, sample_rows


def _append_log(target: str, up_to: int) -> Counter[tuple[object, ...]]:
    rows = read_rows(DeltaTable(target)).to_pylist()
    return Counter(tuple(sorted(r.items())) for r in rows if r["_commit_version"] <= up_to)


def _clean_up_log(path: str) -> None:
    """What the provider's log cleanup does: checkpoint the latest version, drop older commits."""
    dt = DeltaTable(path)
    dt.create_checkpoint()
    for version in range(dt.version()):
        (Path(path) / "_delta_log" / f"{version:020d}.json").unlink()


def _append_then_rewrite(path: str, seed: int) -> None:
    """An append (described by its ``add`` file alone), then an update rewriting every file:
    after a VACUUM the appended file is gone, so that version's changes cannot be served."""
    write_deltalake(path, sample_rows(random.Random(seed), [900 + seed]), mode="append")
    DeltaTable(path).update(updates={"tiny": "coalesce(tiny, 0) / 2"})


def _vacuum(path: str) -> None:
    DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)


@pytest.mark.parametrize("lose_history", [_clean_up_log, _vacuum], ids=["log-cleanup", "vacuum"])
def test_history_gap_rebootstraps_with_a_warning(
    workspace: Workspace, lose_history: Callable[[str], None], cli: Callable[..., CliResult]
) -> None:
    workspace.table("m", rows=25, seed=1)
    workspace.table("a", rows=25, seed=2)
    config = workspace.config(workspace.spec("m"), workspace.spec("a", "append"))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    checkpoint = {c.name: c.version for c in syncer.resources.store.list_checkpoints()}
    for seed, table in enumerate(("m", "a")):
        workspace.commit(table, 2, seed=seed)
        _append_then_rewrite(str(workspace.path(table)), seed)
        lose_history(str(workspace.path(table)))
    log_before = _append_log(workspace.target("a"), checkpoint[workspace.name("a")])

    results = {r.name: r for r in syncer.sync_all()}

    for table in ("m", "a"):
        result = results[workspace.name(table)]
        assert result.outcome is TableOutcome.SYNCED, result.error
        assert result.checkpoint_version == source_version(workspace.path(table))
        assert [b.kind for b in result.batches] == ["bootstrap"]
        assert any("no longer serves" in w for w in result.warnings), result.warnings
    m, a = workspace.path("m"), workspace.path("a")
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m))
    # Append mode keeps its log: the old rows stay, the snapshot lands as inserts at its version.
    assert _append_log(workspace.target("a"), checkpoint[workspace.name("a")]) == log_before
    assert_append_target_matches(
        a,
        workspace.target("a"),
        bootstrap_version=source_version(a),
        end_version=source_version(a),
        above=checkpoint[workspace.name("a")],
    )
    # The warning is on record: the run succeeded, with a note, and status shows it.
    run = syncer.resources.store.latest_runs([workspace.name("m")])[workspace.name("m")]
    assert run.status.value == "succeeded" and run.error is None
    assert run.note and "no longer serves" in run.note
    status = json.loads(cli("--config", str(workspace.config_file), "status", "--json").out)
    row = next(t for t in status["tables"] if t["name"] == workspace.name("m"))
    assert row["last_status"] == "succeeded" and row["last_error"] is None
    assert "no longer serves" in row["last_warning"]


def test_a_recreated_source_rebuilds_merge_and_keeps_the_append_log(workspace: Workspace) -> None:
    """Issue 40: the change log's rows came from a table the provider no longer has. Before, the
    log was overwritten with the new table's snapshot; now it is kept: refused while the new
    table's versions do not pass the log's, then continued from its snapshot, with a warning."""
    for seed, table in enumerate(("m", "a")):
        workspace.table(table, rows=20, seed=seed)
        workspace.commit(table, 5, seed=seed)
    config = workspace.config(workspace.spec("m"), workspace.spec("a", "append"))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    old = {c.name: c for c in syncer.resources.store.list_checkpoints()}
    kept = old[workspace.name("a")].version
    log_before = _append_log(workspace.target("a"), kept)
    commits = len(DeltaTable(workspace.target("a")).history())
    for seed, table in enumerate(("m", "a")):
        shutil.rmtree(workspace.path(table))
        create_sample_table(workspace.path(table), rows=8, seed=50 + seed)  # version 0 again, new id
        workspace.commit(table, 1, seed=60 + seed)

    results = {r.name: r for r in syncer.sync_all()}

    merged = results[workspace.name("m")]
    assert merged.outcome is TableOutcome.SYNCED and merged.checkpoint_version == 1, merged.error
    assert any("re-created" in w for w in merged.warnings), merged.warnings
    recreated = syncer.resources.store.get_checkpoint(workspace.name("m"))
    assert recreated is not None and recreated.table_id != old[workspace.name("m")].table_id
    assert_merge_target_matches(workspace.path("m"), workspace.target("m"), ["id"], 1)
    refused = results[workspace.name("a")]
    assert refused.outcome is TableOutcome.FAILED
    assert f"sharesync reset {workspace.name('a')} --discard-target" in (refused.error or ""), refused.error
    assert "mix two version sequences" in (refused.error or "")
    assert len(DeltaTable(workspace.target("a")).history()) == commits  # nothing written
    assert syncer.resources.store.get_checkpoint(workspace.name("a")) == old[workspace.name("a")]

    workspace.commit("a", kept, seed=70)  # the new table's versions pass the log's
    continued = syncer.sync_all([workspace.name("a")])[0]

    latest = source_version(workspace.path("a"))
    assert continued.outcome is TableOutcome.SYNCED and continued.checkpoint_version == latest, continued.error
    said = [w for w in continued.warnings if f"keeps its change log up to source version {kept}" in w]
    assert len(said) == 1 and "re-created" in said[0], continued.warnings
    assert _append_log(workspace.target("a"), kept) == log_before  # every row of the old table's log
    assert_append_target_matches(
        workspace.path("a"), workspace.target("a"), bootstrap_version=latest, end_version=latest, above=kept
    )
    run = syncer.resources.store.latest_runs([workspace.name("a")])[workspace.name("a")]
    assert run.status.value == "succeeded" and run.note and said[0] in run.note


def test_a_recreated_source_keeps_a_history(workspace: Workspace) -> None:
    """History mode, the same rule: refused while the new versions do not pass the history's
    (before, only once the snapshot was staged, naming a plain reset), then continued."""
    workspace.table("h", rows=12, partitioned=False, seed=3)
    workspace.commit("h", 4, seed=30)
    syncer = workspace.syncer(workspace.config(workspace.spec("h", "history", keys=["id"])))
    syncer.sync_all()
    kept = syncer.resources.store.get_checkpoint(workspace.name("h")).version  # type: ignore[union-attr]
    before = read_rows(DeltaTable(workspace.target("h"))).to_pylist()
    shutil.rmtree(workspace.path("h"))
    create_sample_table(workspace.path("h"), rows=6, seed=31, partitioned=False)  # version 0, new id

    refused = syncer.sync_all()[0]

    assert refused.outcome is TableOutcome.FAILED and "row history" in (refused.error or ""), refused.error
    assert f"sharesync reset {workspace.name('h')} --discard-target" in (refused.error or "")
    workspace.commit("h", kept + 1, seed=32)  # (at version kept it would pass for up to date: guarantees)
    continued = syncer.sync_all()[0]
    assert continued.outcome is TableOutcome.SYNCED, continued.error
    assert any(f"keeps its row history up to source version {kept}" in w for w in continued.warnings)
    after = read_rows(DeltaTable(workspace.target("h"))).to_pylist()
    assert all(r in after for r in before if r["_sharesync_valid_to_version"] is not None)  # closed rows stay
    latest = source_version(workspace.path("h"))
    assert sorted(r["id"] for r in after if r["_sharesync_valid_from_version"] == latest) == sorted(
        read_rows(DeltaTable(str(workspace.path("h")))).column("id").to_pylist()
    )


def test_a_source_without_cdf_rebootstraps_merge_and_fails_append_writing_nothing(workspace: Workspace) -> None:
    """Merge targets are rebuilt from each new snapshot, with a warning; an append target's change
    log would get every snapshot again as inserts, so it fails, naming why (issue 40 §1.2)."""
    workspace.table("m", rows=20, cdf=False, seed=1)
    workspace.table("a", rows=20, cdf=False, seed=2, partitioned=False)
    config = workspace.config(workspace.spec("m"), workspace.spec("a", "append"))
    syncer = workspace.syncer(config)
    first = {r.name: r for r in syncer.sync_all()}
    assert first[workspace.name("m")].outcome is TableOutcome.SYNCED and not first[workspace.name("m")].warnings
    refused = first[workspace.name("a")]
    assert refused.outcome is TableOutcome.FAILED
    assert "does not publish a change data feed" in (refused.error or "") and "nothing was written" in (
        refused.error or ""
    )
    assert (
        not Path(workspace.target("a")).exists() and syncer.resources.store.get_checkpoint(workspace.name("a")) is None
    )
    workspace.commit("m", 3, seed=0)

    result = {r.name: r for r in syncer.sync_all()}[workspace.name("m")]

    assert result.outcome is TableOutcome.SYNCED, result.error
    assert any("change data feed" in w for w in result.warnings), result.warnings
    m = workspace.path("m")
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m))
