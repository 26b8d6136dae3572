"""Starting from an older version or a timestamp, and backfills (replays) from a timestamp."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import engine_cases, on_both_engines
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    source_version,
)

from sharesync.pipelines.run.results import BackfillRequest, TableOutcome
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.errors import StateStoreUnavailable
from sharesync.sync.core.timestamps import to_wire

# The replays run on Sail and on Apache Spark + Delta; which version a start timestamp resolves
# to is the client's decision, tested on Sail alone (its engine work is any bootstrap's).


def commit_time(path: object, version: int) -> datetime:
    """The commit timestamp of ``version`` as the provider's log records it."""
    with open(f"{path}/_delta_log/{version:020d}.json", encoding="utf-8") as log:
        for line in log:
            action = json.loads(line)
            if "commitInfo" in action:
                return datetime.fromtimestamp(action["commitInfo"]["timestamp"] / 1000, tz=UTC)
    raise AssertionError(f"no commitInfo in version {version}")


# Resolving a timestamp to a version is the client's, not the engine's: Spark replays from a version.
@engine_cases(["start"], {"version": ("version",), "timestamp": ("timestamp",)}, on_spark=["version"])
def test_start_from_an_older_version_replays_the_changes_after_it(workspace: Workspace, start: str) -> None:
    for seed, table in enumerate(("m", "a")):
        workspace.table(table, rows=20, seed=seed)
        workspace.commit(table, 5, seed=seed)
    at = {t: (commit_time(workspace.path(t), 2) if start == "timestamp" else None) for t in ("m", "a")}
    spec = {t: ({"version": 2} if start == "version" else {"timestamp": to_wire(at[t])}) for t in ("m", "a")}
    config = workspace.config(
        workspace.spec("m", start=spec["m"], max_versions_per_batch=2),
        workspace.spec("a", "append", start=spec["a"]),
    )
    results = {r.name: r for r in workspace.syncer(config).sync_all()}

    merge = results[workspace.name("m")]
    assert merge.outcome is TableOutcome.SYNCED, merge.error
    assert [(b.kind, b.start_version, b.end_version) for b in merge.batches] == [
        ("bootstrap", 2, 2),
        ("changes", 3, 4),
        ("changes", 5, 5),
    ]
    m, a = workspace.path("m"), workspace.path("a")
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m))
    assert_append_target_matches(a, workspace.target("a"), bootstrap_version=2, end_version=source_version(a))


def _damage(target: str, keys: list[int]) -> None:
    """A user (or a bug) broke some target rows: one is gone, the others hold wrong values."""
    dt = DeltaTable(target)
    dt.delete(f"id = {keys[0]}")
    if keys[1:]:
        DeltaTable(target).update(
            updates={"name": "'damaged'", "qty": "-1"}, predicate=f"id IN ({', '.join(map(str, keys[1:]))})"
        )


@on_both_engines
def test_backfill_from_a_timestamp_replays_merge_and_append_targets(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    for seed, table in enumerate(("m", "a")):
        workspace.table(table, rows=30, partitioned=False, seed=seed)
    config = workspace.config(workspace.spec("m", max_versions_per_batch=2), workspace.spec("a", "append"))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    for seed, table in enumerate(("m", "a")):
        workspace.commit(table, 6, seed=20 + seed)
    syncer.sync_all()
    m, a = workspace.path("m"), workspace.path("a")
    latest = source_version(m)

    # Damage the target rows the provider changed from version 3 on; a replay from 3 repairs them.
    changed = DeltaTable(str(m)).load_cdf(starting_version=3)
    import pyarrow as pa

    live = set(read_rows(DeltaTable(workspace.target("m")))["id"].to_pylist())
    keys = sorted(set(pa.RecordBatchReader.from_stream(changed).read_all()["id"].to_pylist()) & live)
    assert keys, "the random commits must touch live rows from version 3 on"
    _damage(workspace.target("m"), keys[:3])
    DeltaTable(workspace.target("a")).delete("_commit_version >= 3")
    with pytest.raises(AssertionError):
        assert_merge_target_matches(m, workspace.target("m"), ["id"], latest)

    from_ = commit_time(m, 3)
    assert (
        syncer.resources.client_for("default").table_version(workspace.name("m"), starting_timestamp=from_).version == 3
    )
    result = syncer.sync_table(workspace.name("m"), backfill=BackfillRequest(from_))

    assert result.outcome is TableOutcome.SYNCED
    assert result.batches[0].start_version == 3 and result.checkpoint_version == latest
    assert all(b.end_version - b.start_version < 2 for b in result.batches)
    assert_merge_target_matches(m, workspace.target("m"), ["id"], latest)
    assert syncer.resources.store.get_checkpoint(workspace.name("m")).version == latest  # type: ignore[union-attr]

    # The CLI path, on the append table: every change row exactly once again.
    run = cli(
        "--config", str(workspace.config_file), "backfill", workspace.name("a"), "--from", to_wire(commit_time(a, 3))
    )
    assert run.code == 0, run.err
    assert workspace.name("a") in run.out
    assert_append_target_matches(a, workspace.target("a"), bootstrap_version=0, end_version=source_version(a))

    # --to stops the replay early; the checkpoint says so, and the next sync catches up.
    until = cli(
        "--config",
        str(workspace.config_file),
        "backfill",
        workspace.name("m"),
        "--from",
        to_wire(commit_time(m, 2)),
        "--to",
        to_wire(commit_time(m, 4)),
    )
    assert until.code == 0, until.err
    assert syncer.resources.store.get_checkpoint(workspace.name("m")).version == 4  # type: ignore[union-attr]
    assert syncer.sync_all()[0].first_version == 5
    assert_merge_target_matches(m, workspace.target("m"), ["id"], latest)


@on_both_engines
def test_backfill_full_refresh_rebuilds_from_the_snapshot_at_the_timestamp(workspace: Workspace) -> None:
    workspace.table("m", rows=20, seed=3)
    config = workspace.config(workspace.spec("m"))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    workspace.commit("m", 4, seed=9)
    syncer.sync_all()
    m = workspace.path("m")
    _damage(workspace.target("m"), sorted(r["id"] for r in read_rows(DeltaTable(str(m))).to_pylist())[:4])

    result = syncer.sync_table(workspace.name("m"), backfill=BackfillRequest(commit_time(m, 2), full_refresh=True))

    assert result.outcome is TableOutcome.SYNCED
    assert (result.batches[0].kind, result.batches[0].start_version) == ("bootstrap", 2)
    assert result.checkpoint_version == source_version(m)
    assert_merge_target_matches(m, workspace.target("m"), ["id"], source_version(m))


class _LosesTheRefreshsCheckpoint:
    """A state store that goes away right after a target was rewritten, before its checkpoint
    records it: the first checkpoint write that names a new target version fails."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.failed = False

    def advance_checkpoint(self, new: Any, **kwargs: Any) -> Any:
        current = self._store.get_checkpoint(new.name)
        if not self.failed and current is not None and new.target_version != current.target_version:
            self.failed = True
            raise StateStoreUnavailable("injected: the state store went away after the target was rewritten")
        return self._store.advance_checkpoint(new, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@on_both_engines
@pytest.mark.parametrize("mode", ["merge", "append"])
def test_a_full_refresh_cut_off_after_its_bootstrap_loses_no_change(workspace: Workspace, mode: str) -> None:
    """The refresh rewrites the target as the snapshot at version 2 of 5; had the checkpoint
    stayed at 5 until after that write, a crash there would lose versions 3..5 for good."""
    workspace.table("t", rows=20, seed=5)
    config = workspace.config(workspace.spec("t", mode))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    workspace.commit("t", 5, seed=11)
    syncer.sync_all()
    t = workspace.path("t")

    cut = workspace.syncer(config, store=_LosesTheRefreshsCheckpoint(syncer.resources.store))
    with pytest.raises(StateStoreUnavailable, match="injected"):
        cut.sync_table(workspace.name("t"), backfill=BackfillRequest(commit_time(t, 2), full_refresh=True))

    assert syncer.resources.store.get_checkpoint(workspace.name("t")).version == 2  # type: ignore[union-attr]
    assert syncer.sync_all()[0].outcome is TableOutcome.SYNCED
    if mode == "merge":
        assert_merge_target_matches(t, workspace.target("t"), ["id"], source_version(t))
    else:  # the log's rows before the refresh stay (issue 40 §1.3); from 2 on it is the refresh's
        assert_append_target_matches(
            t, workspace.target("t"), bootstrap_version=2, end_version=source_version(t), above=1
        )
        kept = read_rows(DeltaTable(workspace.target("t")))["_commit_version"].to_pylist()
        assert {0, 1} <= set(kept)


def test_a_full_refresh_does_not_ask_for_the_tables_start_again(workspace: Workspace) -> None:
    """The table's ``start`` (a timestamp whose commit the provider no longer serves) is not
    resolved by a full refresh, which starts from its own version: asking would turn the refresh
    into a bootstrap at the latest version."""
    path = workspace.table("m", rows=10, seed=6)
    workspace.commit("m", 3, seed=6)
    config = workspace.config(workspace.spec("m", start={"timestamp": to_wire(commit_time(path, 1))}))
    syncer = workspace.syncer(config)
    syncer.sync_all()
    workspace.commit("m", 2, seed=7)
    DeltaTable(str(path), version=3).create_checkpoint()
    for version in range(3):  # versions 0..2 leave the log; 3..5 are still served
        (path / "_delta_log" / f"{version:020d}.json").unlink()

    result = syncer.sync_table(workspace.name("m"), backfill=BackfillRequest(commit_time(path, 4), full_refresh=True))

    assert result.outcome is TableOutcome.SYNCED, result.error
    assert (result.batches[0].kind, result.batches[0].start_version) == ("bootstrap", 4)
    assert not result.warnings
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))


def test_a_start_timestamp_is_only_resolved_for_the_first_sync(workspace: Workspace) -> None:
    """Once synced, the table's ``start`` no longer matters, even after the provider cleaned up
    the log that held it (resolving it again would fail the table for good)."""
    path = workspace.table("m", rows=10, seed=2)
    workspace.commit("m", 3, seed=2)
    config = workspace.config(workspace.spec("m", start={"timestamp": to_wire(commit_time(path, 1))}))
    syncer = workspace.syncer(config)
    assert syncer.sync_all()[0].first_version == 1
    workspace.commit("m", 2, seed=3)
    DeltaTable(str(path), version=3).create_checkpoint()
    for version in range(3):  # versions 0..2 leave the log; 4 and 5 are still served
        (path / "_delta_log" / f"{version:020d}.json").unlink()

    result = syncer.sync_all()[0]

    assert result.outcome is TableOutcome.SYNCED, result.error
    assert result.first_version == 4 and not result.warnings
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))


def test_a_start_timestamp_the_provider_no_longer_serves_starts_from_the_latest_snapshot(workspace: Workspace) -> None:
    path = workspace.table("m", rows=10, seed=4)
    workspace.commit("m", 4, seed=4)
    start = commit_time(path, 1)
    DeltaTable(str(path), version=3).create_checkpoint()
    for version in range(3):
        (path / "_delta_log" / f"{version:020d}.json").unlink()
    syncer = workspace.syncer(workspace.config(workspace.spec("m", start={"timestamp": to_wire(start)})))

    result = syncer.sync_all()[0]

    assert result.outcome is TableOutcome.SYNCED, result.error
    assert [b.kind for b in result.batches] == ["bootstrap"] and result.checkpoint_version == source_version(path)
    assert any("no longer served" in w for w in result.warnings), result.warnings
    assert_merge_target_matches(path, workspace.target("m"), ["id"], source_version(path))
