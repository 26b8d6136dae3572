"""``include:`` patterns that follow a share (issue 33 §2), through the CLI, on two local servers.

The default provider's share gains a table between passes and the partner's loses one: the new
table is bootstrapped by the next pass; the lost one is reported ``removed at provider`` (in the
results, ``status`` and the run history) with its target and checkpoint kept, and syncing
resumes when it comes back. A pattern's keys apply where the columns exist; elsewhere its
``fallback_mode``, or ``needs keys`` — neither fails the pass. Provider tables are written by
deltalake (``create_sample_table``); a table is removed from a share by moving its directory
out of the served root, as a provider's unsharing removes it from the listing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from typing import Any

import yaml
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.faults import SharingServer

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.core.config import parse_config
from sharesync.sync.server.samples import create_sample_table, table_path


def test_patterns_follow_tables_that_come_and_go_on_two_providers(
    workspace: Workspace, start_server: Callable[..., SharingServer], cli: Callable[..., CliResult]
) -> None:
    for name in ("a", "b", "skip", "nk1"):
        workspace.table(name, rows=6)
    partner_root = workspace.root / "partner-provider"
    for name in ("one", "two"):
        create_sample_table(table_path(partner_root, "p", "x", name), rows=4, seed=9)
    partner = start_server(partner_root)
    raw: dict[str, Any] = workspace.raw_config(
        workspace.spec("a", mode="snapshot", target="warehouse/explicit-a"),  # overrides the pattern
        {"name": "p.x.two", "provider": "partner", "target": "warehouse/partner-two", "mode": "snapshot"},
        providers={"partner": {"profile": str(partner.profile_path)}},
        include=[
            {"pattern": "e2e.s.nk*", "target": "warehouse/nk/{table}", "keys": ["no_such_column"]},
            {"pattern": "e2e.s.*", "exclude": ["e2e.s.skip"], "target": "warehouse/{provider}/{table}", "keys": ["id"]},
            {
                "pattern": "p.*.*",
                "provider": "partner",
                "target": "warehouse/{provider}/{share}/{schema}/{table}",
                "keys": ["no_such_column"],
                "fallback_mode": "append",
            },
        ],
    )
    workspace.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    config = ("--config", str(workspace.config_file))

    first = cli(*config, "sync")
    assert first.code == 0, first.err
    results = _outcomes(first.out)
    assert {"e2e.s.a", "e2e.s.b", "partner/p.x.one", "partner/p.x.two"} <= set(results["synced"])
    assert results["needs keys"] == ["e2e.s.nk1"] and "e2e.s.skip" not in first.out
    assert "no_such_column" in first.out and "fallback_mode" in first.out
    assert _rows(workspace, "warehouse/explicit-a") == 6 and _rows(workspace, "warehouse/default/b") == 6
    assert _rows(workspace, "warehouse/partner/p/x/one") == 4  # appended: the fallback mode

    workspace.table("c", rows=3)  # the share gains a table …
    gone = workspace.root / "unshared-one"
    shutil.move(table_path(partner_root, "p", "x", "one"), gone)  # … and the partner's loses one
    second = cli(*config, "sync")
    assert second.code == 0, second.err
    results = _outcomes(second.out)
    assert results["synced"] == ["e2e.s.c"] and results["removed at provider"] == ["partner/p.x.one"]
    assert _rows(workspace, "warehouse/default/c") == 3
    assert _rows(workspace, "warehouse/partner/p/x/one") == 4  # the target is kept
    rows = {row["name"]: row for row in json.loads(cli(*config, "status", "--json").out)["tables"]}
    removed = rows["partner/p.x.one"]
    assert removed["removed_at_provider"] is True and removed["checkpoint_version"] == 0
    assert removed["provider_error"] is None and removed["mode"] == "append"
    needs = rows["e2e.s.nk1"]
    assert needs["needs_keys"] is True and needs["missing_keys"] == ["no_such_column"]
    assert needs["mode"] is None and needs["provider_error"] is None and "fallback_mode" in needs["note"]
    assert rows["e2e.s.c"]["lag_versions"] == 0
    history = cli(*config, "status").out
    assert "removed at provider" in history

    shutil.move(gone, table_path(partner_root, "p", "x", "one"))  # it comes back: syncing resumes
    third = cli(*config, "sync")
    assert third.code == 0, third.err
    assert "removed at provider" not in third.out
    rows = {row["name"]: row for row in json.loads(cli(*config, "status", "--json").out)["tables"]}
    assert rows["partner/p.x.one"]["removed_at_provider"] is False and rows["partner/p.x.one"]["lag_versions"] == 0
    results = {row["name"]: row for row in json.loads(cli(*config, "sync", "--json").out)["tables"]}
    assert (results["e2e.s.nk1"]["outcome"], results["e2e.s.nk1"]["mode"]) == ("needs_keys", None)
    assert (results["partner/p.x.one"]["outcome"], results["partner/p.x.one"]["mode"]) == ("up_to_date", "append")


def test_discover_config_prints_entries_that_load(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    workspace.table("a", rows=2)
    workspace.table("n", rows=2, cdf=False)
    workspace.config()
    shown = cli("--config", str(workspace.config_file), "discover", "--config")
    assert shown.code == 0, shown.err
    entries = yaml.safe_load(shown.out)
    assert entries["include"] == [
        {"pattern": "e2e.*.*", "target": "./warehouse/{provider}/{share}/{schema}/{table}", "mode": "snapshot"}
    ]
    assert [(t["name"], t["mode"]) for t in entries["tables"]] == [("e2e.s.a", "append"), ("e2e.s.n", "snapshot")]
    config = parse_config({"profile": "p.share", **entries}, base_dir=workspace.root)
    assert [t.target for t in config.tables][0].endswith("warehouse/default/e2e/s/a")


def _outcomes(output: str) -> dict[str, list[str]]:
    """The results table's rows by what happened to the table (its first column is the name)."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        for outcome in ("synced", "up to date", "FAILED", "removed at provider", "needs keys"):
            parts = line.split()
            if parts and outcome in line and "." in parts[0] and not line.startswith(("warning", "error")):
                found.setdefault(outcome, []).append(parts[0])
                break
    return found


def _rows(workspace: Workspace, target: str) -> int:
    return read_rows(DeltaTable(str(workspace.root / target))).num_rows


def test_a_pass_lists_each_selected_share_once_and_asks_metadata_only_of_new_keyed_tables(
    workspace: Workspace,
) -> None:
    from sharesync.pipelines.run.share_listings import select

    for name in ("a", "b", "c"):
        workspace.table(name, rows=2)
    config = workspace.config(
        include=[
            {"pattern": "e2e.s.a", "target": "warehouse/x/{table}", "keys": ["id"]},
            {"pattern": "e2e.*.*", "target": "warehouse/y/{table}", "mode": "append"},
        ]
    )
    client, transport = workspace.counting_client(config)
    selection = select(config, lambda provider: client, {})
    assert [(t.key, t.mode.value) for t in selection.tables] == [
        ("e2e.s.a", "merge"),
        ("e2e.s.b", "append"),
        ("e2e.s.c", "append"),
    ]
    assert transport.endpoints == ["all-tables", "metadata"]  # one listing; the new keyed table's columns
    transport.requests.clear()
    select(config, lambda provider: client, {"e2e.s.a": "merge"})  # synced before: no metadata call
    assert transport.endpoints == ["all-tables"]
    transport.requests.clear()
    every_share = config.model_copy(
        update={"include": [config.include[1].model_copy(update={"pattern": "*.s.*"})]}
    )  # a wildcard share: the provider's shares are listed first
    assert [t.key for t in select(every_share, lambda provider: client, {}).tables] == ["e2e.s.a", "e2e.s.b", "e2e.s.c"]
    assert transport.endpoints == ["shares", "all-tables"]
