"""``sharesync reset`` forgets a checkpoint, not what only the target holds (issue 40 §1.3).

An append target's change log and a history target's row history cannot be rebuilt from the
provider (it vacuums); before, ``reset`` then ``sync`` replaced a 27-row change log with a 13-row
snapshot. Now the next sync keeps them and continues the way ``on_breaking_change: rebuild``
does; ``--discard-target`` removes the target and says what went. ``backfill --full-refresh``
keeps an append log's rows from before its start unless given the same flag.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.history import CURRENT, VF, VT
from support.verify import assert_append_target_matches, source_version

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.timestamps import to_wire

pytestmark = pytest.mark.slow  # starts the embedded engine

Row = tuple[tuple[str, object], ...]


def _rows(target: str) -> list[dict[str, object]]:
    return read_rows(DeltaTable(target)).to_pylist()


def _log(target: str, up_to: int) -> Counter[Row]:
    return Counter(tuple(sorted(r.items())) for r in _rows(target) if r["_commit_version"] <= up_to)  # type: ignore[operator]


def _commit_time(path: Path, version: int) -> datetime:
    with open(path / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as log:
        for line in log:
            if "commitInfo" in (action := json.loads(line)):
                return datetime.fromtimestamp(action["commitInfo"]["timestamp"] / 1000, tz=UTC)
    raise AssertionError(version)


def _run(cli: Callable[..., CliResult], workspace: Workspace, *args: str) -> CliResult:
    run = cli("--config", str(workspace.config_file), *args)
    assert run.code == 0, run.out + run.err
    return run


def test_reset_then_sync_keeps_an_append_log_and_continues_it(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    workspace.table("a", rows=13, partitioned=False, seed=7)
    workspace.config(workspace.spec("a", "append"))
    _run(cli, workspace, "sync")
    workspace.commit("a", 3, seed=70)
    _run(cli, workspace, "sync")
    a, target = workspace.path("a"), workspace.target("a")
    kept = source_version(a)
    before = _log(target, kept)

    reset = _run(cli, workspace, "reset", workspace.name("a"))
    assert f"checkpoint at version {kept} removed" in reset.out and "the target keeps its rows" in reset.out
    workspace.commit("a", 2, seed=71)
    synced = _run(cli, workspace, "sync")

    latest = source_version(a)
    assert _log(target, kept) == before  # every row of the log before the reset, unchanged
    assert_append_target_matches(a, target, bootstrap_version=latest, end_version=latest, above=kept)
    assert f"keeps its change log up to source version {kept}" in synced.out + synced.err
    workspace.commit("a", 2, seed=72)
    _run(cli, workspace, "sync")  # and it goes on from the change feed
    assert_append_target_matches(a, target, bootstrap_version=latest, end_version=source_version(a), above=kept)


def test_reset_then_sync_keeps_a_history_and_continues_it(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    workspace.table("h", rows=12, partitioned=False, seed=8)
    workspace.config(workspace.spec("h", "history", keys=["id"]))
    _run(cli, workspace, "sync")
    workspace.commit("h", 3, seed=80)
    _run(cli, workspace, "sync")
    target = workspace.target("h")
    before = _rows(target)
    closed = [r for r in before if r[VT] is not None]
    assert closed, "the commits must close some history rows"

    _run(cli, workspace, "reset", workspace.name("h"))
    workspace.commit("h", 2, seed=81)
    _run(cli, workspace, "sync")

    after = _rows(target)
    latest = source_version(workspace.path("h"))
    assert all(row in after for row in closed)  # the history before the reset is all there
    reopened = [r for r in after if r[CURRENT]]
    assert all(r[VF] == latest for r in reopened)
    assert len(reopened) == read_rows(DeltaTable(str(workspace.path("h")))).num_rows
    assert len(after) == len(before) + len(reopened)  # every row open before closed at the snapshot


def test_reset_discard_target_removes_the_log_and_says_what_it_removed(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    workspace.table("a", rows=13, partitioned=False, seed=9)
    workspace.config(workspace.spec("a", "append"))
    _run(cli, workspace, "sync")
    workspace.commit("a", 3, seed=90)
    _run(cli, workspace, "sync")
    target = workspace.target("a")
    rows = len(_rows(target))

    reset = _run(cli, workspace, "reset", workspace.name("a"), "--discard-target")

    assert f"target {target} removed ({rows} rows of its append-mode change log)" in reset.out, reset.out
    assert not Path(target).exists()
    _run(cli, workspace, "sync")
    latest = source_version(workspace.path("a"))
    assert_append_target_matches(workspace.path("a"), target, bootstrap_version=latest, end_version=latest)


@pytest.mark.parametrize("discard", [False, True], ids=["kept", "discarded"])
def test_a_full_refresh_keeps_an_append_log_before_its_start_unless_discarded(
    workspace: Workspace, cli: Callable[..., CliResult], discard: bool
) -> None:
    workspace.table("a", rows=13, partitioned=False, seed=10)
    workspace.config(workspace.spec("a", "append"))
    _run(cli, workspace, "sync")
    workspace.commit("a", 5, seed=100)
    _run(cli, workspace, "sync")
    a, target = workspace.path("a"), workspace.target("a")
    before = _log(target, 2)

    flags = ["--full-refresh", *(["--discard-target"] if discard else [])]
    _run(cli, workspace, "backfill", workspace.name("a"), "--from", to_wire(_commit_time(a, 3)), *flags)

    latest = source_version(a)
    if discard:  # the log is the snapshot at 3 and the changes after it
        assert_append_target_matches(a, target, bootstrap_version=3, end_version=latest)
    else:
        assert _log(target, 2) == before
        assert_append_target_matches(a, target, bootstrap_version=3, end_version=latest, above=2)


def test_discard_target_goes_with_a_full_refresh_only(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    workspace.table("a", rows=5, partitioned=False, seed=11)
    workspace.config(workspace.spec("a", "append"))
    config = ("--config", str(workspace.config_file))
    run = cli(*config, "backfill", workspace.name("a"), "--from", "2020-01-01", "--discard-target")
    assert run.code == 2 and "add --full-refresh" in run.err, run.out + run.err


@pytest.mark.parametrize("mode", ["merge", "snapshot"])
def test_moving_an_append_target_to_another_mode_needs_discard_target(
    workspace: Workspace, cli: Callable[..., CliResult], mode: str
) -> None:
    """Refused by the one rule for a move out of history mode, naming the explicit flag; before,
    ``verify`` said the next sync would bootstrap the target."""
    workspace.table("a", rows=10, partitioned=False, seed=11)
    workspace.config(workspace.spec("a", "append"))
    _run(cli, workspace, "sync")
    workspace.commit("a", 2, seed=110)
    _run(cli, workspace, "sync")
    target, discard = workspace.target("a"), f"sharesync reset {workspace.name('a')} --discard-target"
    commits = len(DeltaTable(target).history())
    workspace.config(workspace.spec("a", mode))

    refused = cli("--config", str(workspace.config_file), "sync")

    assert refused.code == 1 and discard in refused.err and "change log would be lost" in refused.err, refused.err
    assert "Traceback" not in refused.err and len(refused.err.strip().splitlines()) == 1, refused.err
    assert len(DeltaTable(target).history()) == commits  # nothing written
    verified = cli("--config", str(workspace.config_file), "verify", workspace.name("a"))  # said "bootstraps it"
    assert verified.code != 0 and discard in verified.out + verified.err, verified.out + verified.err
    _run(cli, workspace, "reset", workspace.name("a"), "--discard-target")
    _run(cli, workspace, "sync")
    assert "_change_type" not in DeltaTable(target).schema().to_arrow().names
