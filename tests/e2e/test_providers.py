"""Several providers in one config (issue 33 §1), through the CLI, on two real local servers.

The state store is the one a one-provider config writes — its schema and the bare
``share.schema.table`` identity of the default provider's tables are what the current release
writes — so adding ``providers:`` to that config keeps every checkpoint: the default provider's
table stays up to date, and the other provider's table of the same name is a table of its own.
A provider that refuses the token, or is down, fails its own tables only.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.faults import SharingServer

from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.sync.server.samples import create_sample_table, table_path


def partner(workspace: Workspace, start_server: Callable[..., SharingServer]) -> SharingServer:
    """A second provider sharing a table of the same name (other rows) and one more table."""
    root = workspace.root / "partner-provider"
    for name, rows in (("orders", 7), ("extra", 3)):
        create_sample_table(table_path(root, workspace.share, workspace.schema, name), rows=rows, seed=5)
    return start_server(root)


def write(workspace: Workspace, raw: dict[str, Any]) -> tuple[str, str]:
    workspace.config_file.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return "--config", str(workspace.config_file)


def rows(workspace: Workspace, target: str) -> int:
    return read_rows(DeltaTable(str(workspace.root / target))).num_rows


def test_two_providers_share_one_store_and_fail_apart(
    workspace: Workspace, start_server: Callable[..., SharingServer], cli: Callable[..., CliResult]
) -> None:
    workspace.table("orders", rows=12)
    other = partner(workspace, start_server)
    orders = workspace.spec("orders", mode="append")
    config = write(workspace, workspace.raw_config(orders))
    assert cli(*config, "sync").code == 0  # a one-provider config, as before

    providers = {"partner": {"profile": str(other.profile_path), "retry_max_attempts": 1}}
    theirs = [
        workspace.spec("orders", mode="append", provider="partner", target="warehouse/partner/orders"),
        workspace.spec("extra", mode="append", provider="partner", target="warehouse/partner/extra"),
    ]
    config = write(workspace, workspace.raw_config(orders, *theirs, providers=providers))
    synced = cli(*config, "sync")
    assert synced.code == 0, synced.err
    assert "partner/e2e.s.orders" in synced.out and "partner/e2e.s.extra" in synced.out
    assert rows(workspace, "warehouse/orders") == 12 and rows(workspace, "warehouse/partner/orders") == 7
    statuses = {row["name"]: row for row in json.loads(cli(*config, "status", "--json").out)["tables"]}
    assert set(statuses) == {"e2e.s.orders", "partner/e2e.s.orders", "partner/e2e.s.extra"}
    assert statuses["e2e.s.orders"]["provider_name"] == "default"
    assert statuses["partner/e2e.s.orders"]["provider_name"] == "partner"
    assert all(row["lag_versions"] == 0 and row["last_status"] == "succeeded" for row in statuses.values())
    shown = cli(*config, "status").out
    assert shown.split()[0].startswith("provid") and "partner" in shown and "default" in shown  # a provider column

    # The partner's token is refused: its tables fail, the default provider's still syncs.
    refused = workspace.root / "refused.share"
    profile = json.loads(Path(str(other.profile_path)).read_text(encoding="utf-8"))
    refused.write_text(json.dumps({**profile, "bearerToken": "not-the-token"}), encoding="utf-8")
    providers["partner"]["profile"] = str(refused)
    config = write(workspace, workspace.raw_config(orders, *theirs, providers=providers))
    workspace.commit("orders", 2, seed=3)
    failed = cli(*config, "sync")
    assert failed.code == 1
    assert "error: partner/e2e.s.orders:" in failed.err and "error: partner/e2e.s.extra:" in failed.err
    assert "error: e2e.s.orders:" not in failed.err
    assert "not-the-token" not in failed.out + failed.err
    statuses = {row["name"]: row for row in json.loads(cli(*config, "status", "--json").out)["tables"]}
    assert statuses["e2e.s.orders"]["lag_versions"] == 0
    assert statuses["partner/e2e.s.orders"]["last_status"] == "failed"

    # The partner is down: the same.
    other.stop()
    providers["partner"]["profile"] = str(other.profile_path)
    config = write(workspace, workspace.raw_config(orders, *theirs, providers=providers))
    workspace.commit("orders", 1, seed=4)
    down = cli(*config, "sync")
    assert down.code == 1 and "error: partner/e2e.s.extra:" in down.err
    assert json.loads(cli(*config, "status", "--json").out)["tables"][0]["lag_versions"] == 0

    # The partner's profile is missing: with several providers, that too fails its tables only
    # (exit 2, as for any table whose config is wrong; the default provider's table still synced).
    providers["partner"]["profile"] = str(workspace.root / "no-such.share")
    config = write(workspace, workspace.raw_config(orders, *theirs, providers=providers))
    workspace.commit("orders", 1, seed=5)
    missing = cli(*config, "sync")
    assert missing.code == 2 and "error: partner/e2e.s.orders: profile file" in missing.err, missing.err
    statuses = {row["name"]: row for row in json.loads(cli(*config, "status", "--json").out)["tables"]}
    assert statuses["e2e.s.orders"]["lag_versions"] == 0
    assert "warning: provider 'partner': profile file" in cli(*config, "status").out
