"""The commands besides ``sync`` keep the exit-code promise: 1 when a table failed, 2 when the
command could not run — one ``error:`` line on stderr each time, never a traceback."""

from __future__ import annotations

import shutil
from collections.abc import Callable

from support.cli_runner import CliResult
from support.e2e import Workspace
from support.history import commit_times

from sharesync.state import open_store
from sharesync.sync.core.timestamps import to_wire


def _synced(workspace: Workspace, cli: Callable[..., CliResult]) -> tuple[str, ...]:
    workspace.table("t", rows=10)
    workspace.commit("t", 2, seed=1)
    workspace.config(workspace.spec("t"))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    return config


def test_a_backfill_whose_table_fails_exits_1_with_the_tables_error(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    config = _synced(workspace, cli)
    shutil.rmtree(workspace.path("t"))  # the provider's table is gone

    run = cli(*config, "backfill", workspace.name("t"), "--from", "2020-01-01")

    assert run.code == 1, run.out + run.err
    assert f"error: {workspace.name('t')}: " in run.err and "Traceback" not in run.out + run.err


def test_a_backfill_ending_before_it_starts_is_refused_and_moves_nothing(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    config = _synced(workspace, cli)
    stamps = commit_times(workspace.path("t"))
    store = open_store(f"sqlite:///{workspace.root / 'state' / 'state.db'}")
    before = store.get_checkpoint(workspace.name("t"))

    run = cli(*config, "backfill", workspace.name("t"), "--from", to_wire(stamps[2]), "--to", to_wire(stamps[0]))

    assert run.code == 2 and "ends" in run.err and "before it starts" in run.err, run.out + run.err
    assert store.get_checkpoint(workspace.name("t")) == before


def test_preview_of_a_name_that_is_not_share_schema_table_is_a_usage_error(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    config = _synced(workspace, cli)

    run = cli(*config, "preview", "just-a-name")

    assert run.code == 2 and "is not 'share.schema.table'" in run.err and "Traceback" not in run.err


def test_verify_of_a_target_whose_log_is_corrupt_is_one_error_line(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    config = _synced(workspace, cli)
    newest = max((workspace.root / "warehouse" / "t" / "_delta_log").glob("*.json"))
    newest.write_text("{not json", encoding="utf-8")

    for args in ((), ("--full",)):
        run = cli(*config, "verify", workspace.name("t"), *args)
        assert run.code == 2, run.out + run.err
        lines = [line for line in run.err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in run.err, run.err


def test_a_table_named_twice_is_synced_once(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    """Twice at once, it would fail against its own lease."""
    workspace.table("t", rows=10)
    workspace.config(workspace.spec("t"))
    name = workspace.name("t")

    run = cli("--config", str(workspace.config_file), "sync", name, name.upper(), "--parallel", "2")

    assert run.code == 0, run.out + run.err
    assert [line.split()[0] for line in run.out.splitlines() if line.strip().startswith(name)] == [name]
