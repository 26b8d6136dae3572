"""``sharesync optimize [NAME…]`` and ``sharesync vacuum [NAME…]``: keep targets healthy to read.

``optimize`` compacts the targets whose log shows too many small files or too many rows hidden
by deletion vectors (``--force``: every target; ``--merge-on-read`` first turns a copy-on-write
target's deletion vectors on); ``vacuum`` removes the files no version of the
last ``--retain-hours`` needs. Each table under its sync lease: one a sync holds is refused, the
others still run. Exit 0 when every table was done (or had nothing to do), 1 when one failed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from sharesync.sync.cli.main import EXIT_TABLE_FAILED
from sharesync.sync.core.config import load_config
from sharesync.sync.core.maintenance_settings import DEFAULT_RETAIN_HOURS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sharesync.pipelines.commands.maintenance_run import Maintained

MIN_RETAIN_HOURS = 1  # below it only with the explicit flag: a running reader's files may go
_UNSAFE_FLAG = "--allow-breaking-running-readers"


@click.command("optimize")
@click.argument("names", nargs=-1)
@click.option("--force", is_flag=True, help="Compact every named (or configured) target, not only those that need it.")
@click.option(
    "--merge-on-read",
    is_flag=True,
    help="First turn deletion vectors on for targets created without them (readers must support them).",
)
@click.pass_context
def optimize_command(ctx: click.Context, names: tuple[str, ...], force: bool, merge_on_read: bool) -> None:
    """Compact targets with many small files or deletion vectors, keeping their rows."""
    from sharesync.pipelines.commands.maintenance_run import optimize_tables
    from sharesync.pipelines.run.sync_pass import Syncer

    with Syncer(load_config(ctx.obj["config_file"])) as syncer:
        _report(optimize_tables(syncer, names, force=force, merge_on_read=merge_on_read))


@click.command("vacuum")
@click.argument("names", nargs=-1)
@click.option(
    "--retain-hours",
    type=click.IntRange(min=0),
    default=DEFAULT_RETAIN_HOURS,
    show_default=True,
    metavar="N",
    help="Keep every file a version of the last N hours needs (Delta's default, 7 days, protects running readers).",
)
@click.option(
    "--allow-breaking-running-readers",
    "unsafe",
    is_flag=True,
    help=f"Allow --retain-hours under {MIN_RETAIN_HOURS}: a reader still on an older version may fail.",
)
@click.pass_context
def vacuum_command(ctx: click.Context, names: tuple[str, ...], retain_hours: int, unsafe: bool) -> None:
    """Remove target files that no version within the retention needs any more."""
    if retain_hours < MIN_RETAIN_HOURS and not unsafe:
        raise click.BadParameter(
            f"{retain_hours} h would remove files a reader that is running now may still need; "
            f"use {MIN_RETAIN_HOURS} or more, or add {_UNSAFE_FLAG}",
            param_hint="--retain-hours",
        )
    from sharesync.pipelines.commands.maintenance_run import vacuum_tables
    from sharesync.pipelines.run.sync_pass import Syncer

    with Syncer(load_config(ctx.obj["config_file"])) as syncer:
        _report(vacuum_tables(syncer, names, retain_hours=retain_hours))


def _report(done: Sequence[Maintained]) -> None:
    for table in done:
        if table.ok:
            click.echo(f"{table.name}: {table.line}")
        else:
            click.echo(f"error: {table.name}: {table.line}", err=True)
    if not all(table.ok for table in done):
        sys.exit(EXIT_TABLE_FAILED)
