"""``sharesync verify NAME [--full]``: does the target hold what its checkpoint claims?

By default the cheap identity check: the target is the Delta table the checkpoint was written
for, at the recorded state (or newer by commits that kept it). ``--full`` also compares the
target's rows with the provider's snapshot at the checkpoint version (merge: key set and row
count; snapshot: row count). Nothing is changed either way: exit 0 when all agrees, 1 when it
does not (the next ``sharesync sync`` heals a lost, replaced or rolled-back target; a full
difference calls for ``sharesync reset NAME``), 2 when the check could not run.
"""

from __future__ import annotations

import sys

import click

from sharesync.sync.cli.main import EXIT_TABLE_FAILED
from sharesync.sync.core.config import load_config


@click.command("verify")
@click.argument("name")
@click.option("--full", is_flag=True, help="Also compare the target's keys and rows with the provider's snapshot.")
@click.pass_context
def verify_command(ctx: click.Context, name: str, full: bool) -> None:
    """Check a table's target against its checkpoint, changing nothing."""
    from sharesync.pipelines.commands.verification import verify_table
    from sharesync.pipelines.run.sync_pass import Syncer

    with Syncer(load_config(ctx.obj["config_file"])) as syncer:
        found = verify_table(syncer.resources, syncer.table(name), full=full)
    for line in found.lines():
        click.echo(f"{found.name}: {line}")
    if not found.ok:
        click.echo(f"error: {found.name}: the target does not hold what its checkpoint claims", err=True)
        sys.exit(EXIT_TABLE_FAILED)
