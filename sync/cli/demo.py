"""``sharesync demo``: the whole product in under a minute, on the embedded defaults.

Builds sample provider tables, serves them on a local Delta Sharing server, writes a config,
syncs (bootstrap), commits changes at the provider, syncs again (incremental), and prints
the status and a few target rows. Everything lands in one directory the user can inspect,
with a ``sharesync.yaml`` and a ``workspace.yaml`` that make it the place to run more commands
(``sharesync status``, ``dagster dev``); ``--keep-serving`` keeps the provider up for them, and
the printed "Try next" steps say how to serve it again otherwise.
"""

from __future__ import annotations

import contextlib
import random
import shlex
import shutil
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

if TYPE_CHECKING:
    from rich.console import Console


# `dagster dev` run in the demo's directory loads this (and the definitions read ./sharesync.yaml).
WORKSPACE = """load_from:
  - python_module:
      module_name: sharesync.pipelines.dagster.definitions
      location_name: sharesync
"""


@click.command("demo")
@click.option("--dir", "directory", type=click.Path(file_okay=False), default="sharesync-demo", show_default=True)
@click.option("--keep-serving", is_flag=True, help="Keep the provider server running after the demo (Ctrl-C stops).")
def demo(directory: str, keep_serving: bool) -> None:
    """Build sample tables, serve them, sync, change them, sync again."""
    from rich.console import Console

    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.sync.cli.rendering import print_results
    from sharesync.sync.core.config import load_config
    from sharesync.sync.server.runner import SharingServer
    from sharesync.sync.server.samples import apply_random_commits, build_demo_provider

    console = Console()
    root = Path(directory).resolve()
    shutil.rmtree(root, ignore_errors=True)
    provider = root / "provider"
    console.rule("[bold]1. The provider's tables")
    tables = build_demo_provider(provider)
    for table in tables:
        console.print(f"  {table.full_name}  ({table.path})")

    with SharingServer(provider) as server:
        profile = server.write_profile(root / "provider.share")
        config_file = _write_config(root, profile)
        console.print(f"  served at {server.endpoint}; profile {profile}; config {config_file}")

        config = load_config(config_file)
        console.rule("[bold]2. First sync: bootstrap from the snapshots")
        with Syncer(config) as syncer:
            print_results(syncer.sync_all())

            console.rule("[bold]3. The provider commits inserts, updates, deletes and merges")
            rng = random.Random(42)
            for table in tables:
                done = apply_random_commits(table.path, rng, 3)
                console.print(f"  {table.full_name}: {', '.join(done)}")

            console.rule("[bold]4. Second sync: only the changes")
            print_results(syncer.sync_all())

            console.rule("[bold]5. Status")
            from sharesync.pipelines.commands.status import table_statuses

            rows, _ = table_statuses(syncer)
            for row in rows:
                console.print(
                    f"  {row.name}: checkpoint {row.checkpoint_version} = source {row.source_version} "
                    f"(lag {row.lag_versions}), last run {row.last_status}"
                )
        console.rule("[bold]6. A few target rows")
        _print_target_rows(console, config.tables[0].target)
        click.echo("\n" + "\n".join(next_steps(root, serving=keep_serving)))
        if keep_serving:
            console.print(f"\nServing {server.endpoint} until Ctrl-C …")
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()


def next_steps(root: Path, *, serving: bool) -> list[str]:
    """The "Try next" lines: each command works as printed, in order, pasted into a shell.

    They run in the demo's directory (its ``sharesync.yaml`` is the default config, its
    ``workspace.yaml`` the default of ``dagster dev``), so they stay short and unwrapped, after
    activating this installation's venv when ``sharesync`` is not on PATH (README's
    ``.venv/bin/sharesync demo``). Every one needs the provider, which stops with the demo unless
    ``--keep-serving``: then the first step serves the same tables again (a new port, written
    into the profile the config names) and the others go to a second terminal.
    """
    setup = [f"  {line}" for line in (*_activate(), f"cd {shlex.quote(str(root))}")]
    commands = ("status", "sync", "discover", "preview demo.sales.orders --limit 5")
    steps = [*(f"  sharesync {command}" for command in commands), "  dagster dev"]
    if serving:
        return ["Try next, in a second terminal (this one keeps the provider running):", *setup, *steps]
    serve = "  sharesync serve provider --port 0 --profile-out provider.share"
    return [
        "Try next, in the demo's directory:",
        *setup,
        "The demo's provider has stopped; serve its tables again (Ctrl+C stops it):",
        serve,
        "Then, in a second terminal, after the same " + ("two lines" if len(setup) > 1 else "cd") + ":",
        *steps,
    ]


def _activate() -> list[str]:
    """How the user's shell finds this installation's commands: nothing when PATH already does
    (an active venv or an installed tool), else the venv's activate script."""
    scripts = Path(sys.executable).parent  # console scripts sit next to the interpreter
    found = shutil.which("sharesync")
    if found is not None and Path(found).resolve() == (scripts / "sharesync").resolve():
        return []
    activate = scripts / "activate"
    return [f"source {shlex.quote(str(activate))}"] if activate.exists() else []


def _write_config(root: Path, profile: Path) -> Path:
    config = {
        "profile": profile.name,
        "state_store": "sqlite:///.sharesync/state.db",
        "staging_dir": ".sharesync/staging",
        "tables": [
            {"name": "demo.sales.orders", "target": "warehouse/orders", "keys": ["id"], "mode": "merge"},
            {"name": "demo.sales.customers", "target": "warehouse/customers_changes", "mode": "append"},
        ],
    }
    path = root / "sharesync.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (root / "workspace.yaml").write_text(WORKSPACE, encoding="utf-8")
    return path


def _print_target_rows(console: Console, target: str, limit: int = 5) -> None:
    from rich.table import Table

    from sharesync.pipelines.targets.delta.open import open_target
    from sharesync.pipelines.targets.delta.rows import read_rows
    from sharesync.sync.core.location import locate

    data = read_rows(open_target(locate(target))).sort_by("id").slice(0, limit)
    table = Table(*data.column_names[:8])
    for row in data.to_pylist():
        table.add_row(*[str(v) for v in list(row.values())[:8]])
    console.print(f"  {target}")
    console.print(table)
