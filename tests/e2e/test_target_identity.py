"""A checkpoint describes its target: a lost, replaced or rolled-back target is found and healed.

Through the CLI (in-process), for a merge, an append and a snapshot table at once: after two
syncs, each target is deleted, replaced by another Delta table (one sharesync wrote for another
table; one written by somebody else, which is refused and left alone), or rolled back (deltalake's
RESTORE, or a backup of its directory copied back) — then synced again, with nothing new at the
provider or after two more commits. Every time the target ends up equal to the source at the
checkpoint, the CLI and the run record carry the warning, and the pass after that is a plain no-op.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.engines import engine_cases, on_both_engines
from support.history import assert_history_matches, source_history
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import Checkpoint, StateStore, open_store

MODES = {"m": "merge", "a": "append", "s": "snapshot"}
FIRST = 2  # the provider's version at the first sync (the append log's bootstrap)

# What the warning of each damage says (snapshot targets are always rebuilt).
SAID = {
    "deleted": "was lost; rebuilt from the provider's snapshot at version",
    "replaced": "was replaced by another Delta table written by sharesync",
    "restored": "was rolled back to an older state (RESTORE to version",
    "backup": "was rolled back to an older state (version",
}
REPLAYED = "so the provider's changes are replayed from version"


class Site:
    def __init__(self, workspace: Workspace, cli: Callable[..., CliResult], *, donors: bool = False) -> None:
        self.ws, self._cli = workspace, cli
        tables = [*MODES, *(f"d{t}" for t in MODES)] if donors else list(MODES)
        for seed, table in enumerate(tables):
            workspace.table(table, rows=30, seed=seed)
            workspace.commit(table, FIRST, seed=10 + seed)
        workspace.config(*(workspace.spec(t, MODES[t[-1]]) for t in tables))
        self.store: StateStore = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")

    def sync(self) -> CliResult:
        return self._cli("--config", str(self.ws.config_file), "sync")

    def commit(self, n: int, seed: int) -> None:
        for offset, table in enumerate(MODES):
            self.ws.commit(table, n, seed=seed + offset)

    def checkpoint(self, table: str) -> Checkpoint:
        checkpoint = self.store.get_checkpoint(self.ws.name(table))
        assert checkpoint is not None, f"{table}: no checkpoint"
        return checkpoint

    def checkpoint_version(self, table: str) -> int:
        return self.checkpoint(table).version

    def assert_targets_match(self, append_bootstrap: int) -> None:
        ws = self.ws
        for table, mode in MODES.items():
            source, target, version = ws.path(table), ws.target(table), self.checkpoint_version(table)
            assert version == source_version(source), f"{table}: checkpoint {version} is not the source's latest"
            if mode == "merge":
                assert_merge_target_matches(source, target, ["id"], version)
            elif mode == "snapshot":
                assert_snapshot_target_matches(source, target, version)
            else:
                assert_append_target_matches(source, target, bootstrap_version=append_bootstrap, end_version=version)

    def note(self, table: str) -> str:
        name = self.ws.name(table)
        run = self.store.latest_runs([name])[name]
        assert run.status.value == "succeeded", run
        return run.note or ""


def _damage(site: Site, kind: str, backups: dict[str, Path], recorded: dict[str, int]) -> None:
    for table in MODES:
        target = site.ws.target(table)
        if kind == "deleted":
            shutil.rmtree(target)
        elif kind == "replaced":  # another table that sharesync wrote, in the same mode
            shutil.rmtree(target)
            shutil.copytree(site.ws.target(f"d{table}"), target)
        elif kind == "restored":
            DeltaTable(target).restore(recorded[table])
        elif kind == "backup":  # the directory as it was after the first sync, copied back
            shutil.rmtree(target)
            shutil.copytree(backups[table], target)
        else:  # pragma: no cover
            raise AssertionError(kind)


# On Spark: one replacement, one rollback replayed and one restored backup (the kinds are judged by
# pure planning; the engine's part is the rebuild and the replay).
@engine_cases(
    ["kind", "changes"],
    {
        f"{kind}-{said}": (kind, changes)
        for kind in SAID
        for said, changes in (("no-op", False), ("with-changes", True))
    },
    on_spark=["replaced-with-changes", "restored-with-changes", "backup-no-op"],
)
def test_a_damaged_target_is_healed_with_a_warning(
    workspace: Workspace, cli: Callable[..., CliResult], tmp_path: Path, kind: str, changes: bool
) -> None:
    site = Site(workspace, cli, donors=kind == "replaced")
    assert site.sync().code == 0
    backups = {t: tmp_path / "backup" / t for t in MODES}
    for table, backup in backups.items():
        shutil.copytree(workspace.target(table), backup)
    recorded = {}
    for table in MODES:
        checkpoint = site.store.get_checkpoint(workspace.name(table))
        assert checkpoint is not None and checkpoint.target_version is not None and checkpoint.target_table_id
        recorded[table] = checkpoint.target_version
    site.commit(2, seed=100)
    assert site.sync().code == 0
    _damage(site, kind, backups, recorded)
    if changes:
        site.commit(2, seed=200)

    result = site.sync()

    assert result.code == 0, result.out + result.err
    rebuilt = kind in ("deleted", "replaced")
    for table, mode in MODES.items():
        warning = next(
            (line for line in result.out.splitlines() if line.startswith(f"warning: {workspace.name(table)}: ")), ""
        )
        assert SAID[kind] in warning, result.out
        if rebuilt or mode == "snapshot":
            assert f"rebuilt from the provider's snapshot at version {site.checkpoint_version(table)}" in warning
        else:
            assert REPLAYED in warning, warning
        assert SAID[kind] in site.note(table)
    site.assert_targets_match(append_bootstrap=site.checkpoint_version("a") if rebuilt else FIRST)

    # The checkpoint now describes the healed target: the next pass is a plain no-op.
    again = site.sync()
    assert again.code == 0 and "warning" not in again.out, again.out
    rows = [line.split() for line in again.out.splitlines()]
    assert all([workspace.name(t), "up", "to", "date"] in [r[:4] for r in rows] for t in MODES), again.out


@engine_cases(["changes"], {"no-op": (False,), "with-changes": (True,)}, on_spark=["with-changes"])
def test_a_table_sharesync_did_not_write_is_refused_and_left_alone(
    workspace: Workspace, cli: Callable[..., CliResult], changes: bool
) -> None:
    site = Site(workspace, cli)
    assert site.sync().code == 0
    foreign = pa.table({"id": [1, 2], "note": ["mine", "keep me"]})
    checkpoints = {}
    for table in MODES:
        shutil.rmtree(workspace.target(table))
        write_deltalake(workspace.target(table), foreign)
        checkpoints[table] = site.store.get_checkpoint(workspace.name(table))
    if changes:
        site.commit(2, seed=300)

    result = site.sync()

    assert result.code == 1, result.out + result.err
    errors = [line for line in result.err.splitlines() if line.startswith("error:")]
    assert len(errors) == len(MODES), result.err
    for table in MODES:
        [line] = [e for e in errors if f" {workspace.name(table)}: " in e]
        assert f"target {workspace.target(table)} is now a Delta table that sharesync did not write" in line
        assert "sharesync will not overwrite it. Move that table elsewhere" in line
        assert DeltaTable(workspace.target(table)).version() == 0  # untouched
        assert read_rows(DeltaTable(workspace.target(table))).to_pylist() == foreign.to_pylist()
        assert site.store.get_checkpoint(workspace.name(table)) == checkpoints[table]
        name = workspace.name(table)
        run = site.store.latest_runs([name])[name]
        assert run.status.value == "failed" and "did not write" in (run.error or "")

    # Moved out of the way, the table is rebuilt.
    for table in MODES:
        shutil.rmtree(workspace.target(table))
    assert site.sync().code == 0
    site.assert_targets_match(append_bootstrap=site.checkpoint_version("a"))


@on_both_engines
def test_verify_finds_a_planted_difference_and_changes_nothing(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    site = Site(workspace, cli)
    assert site.sync().code == 0
    config = str(workspace.config_file)

    def verify(table: str, *full: str) -> CliResult:
        return cli("--config", config, "verify", workspace.name(table), *full)

    for table in MODES:
        cheap, deep = verify(table), verify(table, "--full")
        assert cheap.code == deep.code == 0, cheap.out + cheap.err + deep.out + deep.err
        assert "is the table the checkpoint describes" in cheap.out
    rows = {t: read_rows(DeltaTable(str(workspace.path(t)), version=FIRST)).num_rows for t in ("m", "s")}
    assert (
        f"the target matches the provider's snapshot at version 2 ({rows['m']} rows in the target"
        in verify("m", "--full").out
    )
    assert "only its identity is checked" in verify("a", "--full").out

    # A row deleted behind sharesync's back: the identity still holds, the full check finds the key.
    for table in ("m", "s"):  # (the snapshot target: a row of its own)
        some_id = read_rows(DeltaTable(workspace.target(table)), ["id"])["id"][0].as_py()
        DeltaTable(workspace.target(table)).delete(f"id = {some_id}")
    before = {
        t: (DeltaTable(workspace.target(t)).version(), site.store.get_checkpoint(workspace.name(t))) for t in MODES
    }

    assert verify("m").code == 0
    merge, snapshot = verify("m", "--full"), verify("s", "--full")

    assert merge.code == snapshot.code == 1, merge.out + snapshot.out
    n = rows["m"]
    assert f"{n - 1} rows in the target, {n} in the provider's snapshot at version 2; 1 keys missing, 0 keys extra" in (
        merge.out
    )
    gone = {r["id"] for r in read_rows(DeltaTable(str(workspace.path("m")), version=FIRST)).to_pylist()}
    gone -= {r["id"] for r in read_rows(DeltaTable(workspace.target("m"))).to_pylist()}
    assert f"missing ({gone.pop()},)" in merge.out
    assert "error: e2e.s.m: the target does not hold what its checkpoint claims" in merge.err
    assert f"{rows['s'] - 1} rows in the target, {rows['s']} in the provider's snapshot" in snapshot.out
    after = {
        t: (DeltaTable(workspace.target(t)).version(), site.store.get_checkpoint(workspace.name(t))) for t in MODES
    }
    assert after == before  # verify changes nothing
    assert not [p for p in (workspace.root / "staging").rglob("*") if p.is_file()]

    # A lost target is what the cheap check is for.
    shutil.rmtree(workspace.target("a"))
    lost = verify("a")
    assert lost.code == 1 and "is gone (no Delta table there); the next sync rebuilds it" in lost.out


@on_both_engines
def test_a_rolled_back_target_whose_history_is_gone_is_rebuilt(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    site = Site(workspace, cli)
    assert site.sync().code == 0
    recorded = {t: site.checkpoint(t).target_version for t in MODES}
    site.commit(2, seed=400)
    assert site.sync().code == 0
    for table in MODES:
        DeltaTable(workspace.target(table)).restore(recorded[table])
    kept = _log_up_to(workspace.target("a"), FIRST)
    faults = workspace.server.faults
    faults.history_error, faults.budget = "version_not_found", 2  # the replays of the merge and append tables

    result = site.sync()

    assert result.code == 0, result.out + result.err
    assert faults.budget == 0
    for table in ("m", "a"):
        lines = [line for line in result.out.splitlines() if line.startswith(f"warning: {workspace.name(table)}: ")]
        assert any(REPLAYED in line for line in lines) and any("no longer serves" in line for line in lines), lines
    # Rebuilt from the latest snapshot; the append log keeps what the restored target held.
    ws, version = workspace, site.checkpoint_version("a")
    assert _log_up_to(ws.target("a"), FIRST) == kept
    assert_append_target_matches(
        ws.path("a"), ws.target("a"), bootstrap_version=version, end_version=version, above=FIRST
    )
    assert_merge_target_matches(ws.path("m"), ws.target("m"), ["id"], site.checkpoint_version("m"))
    assert_snapshot_target_matches(ws.path("s"), ws.target("s"), site.checkpoint_version("s"))


def _log_up_to(target: str, version: int) -> Counter[tuple[object, ...]]:
    rows = read_rows(DeltaTable(target)).to_pylist()
    return Counter(tuple(sorted(r.items())) for r in rows if r["_commit_version"] <= version)


@on_both_engines
def test_a_checkpoint_without_target_identity_behaves_as_before_until_its_next_batch(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    site = Site(workspace, cli)
    assert site.sync().code == 0
    site.commit(1, seed=450)
    assert site.sync().code == 0
    for table in MODES:  # as written by a sharesync that did not record the target
        old = site.store.get_checkpoint(workspace.name(table))
        assert old is not None
        bare = dataclasses.replace(old, updated_at=None, target_table_id=None, target_version=None, target_mode=None)
        site.store.advance_checkpoint(bare, expected_version=old.version)
        DeltaTable(workspace.target(table)).restore(0)  # not noticed without a record

    assert all(site.checkpoint(t).target_version is None for t in MODES)
    again = site.sync()
    assert again.code == 0 and "warning" not in again.out and again.out.count("up to date") == len(MODES)

    site.commit(1, seed=500)
    assert site.sync().code == 0
    for table in MODES:
        checkpoint = site.store.get_checkpoint(workspace.name(table))
        target = DeltaTable(workspace.target(table))
        assert checkpoint is not None and checkpoint.target_version == target.version()
        assert checkpoint.target_table_id == target.metadata().id and checkpoint.target_mode == MODES[table]


@on_both_engines
def test_a_history_target_replaced_by_another_sharesync_table_is_rebuilt(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    for seed, table in enumerate(("h", "dh")):
        workspace.table(table, rows=30, seed=seed)
        workspace.commit(table, FIRST, seed=10 + seed)
    workspace.config(*(workspace.spec(t, "history", keys=["id"]) for t in ("h", "dh")))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    workspace.commit("h", 2, seed=300)  # the donor's rows are all older than this target's
    assert cli(*config, "sync").code == 0
    shutil.rmtree(workspace.target("h"))
    shutil.copytree(workspace.target("dh"), workspace.target("h"))

    result = cli(*config, "sync")

    assert result.code == 0, result.out + result.err
    assert SAID["replaced"] in result.out and "starts again there" in result.out, result.out
    checkpoint = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}").get_checkpoint(workspace.name("h"))
    assert checkpoint is not None
    version = checkpoint.version
    expected = source_history(workspace.path("h"), ["id"], start=version, end=version)
    assert_history_matches(workspace.target("h"), expected, ["id"])  # none of the donor's rows


@engine_cases(["before"], {m: (m,) for m in ("merge", "snapshot", "history")}, on_spark=["history"])
def test_a_target_switched_to_append_mode_restarts_as_a_change_log(
    workspace: Workspace, cli: Callable[..., CliResult], before: str
) -> None:
    """Another mode's target becomes the log from the snapshot on (a history, which only the target
    holds, needs a reset that discards it first)."""
    workspace.table("w", rows=20, seed=3)
    workspace.config(workspace.spec("w", before, **({"keys": ["id"]} if before == "history" else {})))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    workspace.commit("w", 2, seed=31)
    workspace.config(workspace.spec("w", "append"))
    if before == "history":
        assert cli(*config, "reset", workspace.name("w"), "--discard-target").code == 0

    result = cli(*config, "sync")

    assert result.code == 0, result.out + result.err
    version = source_version(workspace.path("w"))
    assert_append_target_matches(
        workspace.path("w"), workspace.target("w"), bootstrap_version=version, end_version=version
    )
    workspace.commit("w", 2, seed=32)
    assert cli(*config, "sync").code == 0
    latest = source_version(workspace.path("w"))
    assert_append_target_matches(
        workspace.path("w"), workspace.target("w"), bootstrap_version=version, end_version=latest
    )
