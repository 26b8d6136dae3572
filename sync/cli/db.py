"""``sharesync db``: look at, migrate and prune the state database explicitly.

sharesync migrates the state store by itself when it opens it, and prunes the run history of
each table it syncs; these commands exist for operators who want migrations as a separate,
visible deployment step, to see which revision a database is at without touching it, and to
prune every table's history at once (tables no longer configured included). The URL comes from ``--url``, else from the
config file (where ``SHARESYNC_STATE_STORE`` already overrides ``state_store``), else — with no
config file at all — from ``SHARESYNC_STATE_STORE`` alone. Failures are :mod:`sharesync.sync.core.errors`
classes, which ``sharesync`` turns into one line on stderr and exit code 2.
"""

from __future__ import annotations

import os

import click

from sharesync.sync.core.config import ENV_OVERRIDES, SharesyncConfig, config_path, load_config
from sharesync.sync.core.errors import ConfigError

STATE_STORE_ENV = ENV_OVERRIDES["state_store"]

_url_option = click.option(
    "--url",
    default=None,
    metavar="URL",
    help=f"State database URL (default: the config's state_store; ${STATE_STORE_ENV} overrides it).",
)


def _config(ctx: click.Context) -> SharesyncConfig | None:
    """The config file's settings, if there is a config file (``--config`` must exist)."""
    config_file = (ctx.find_root().obj or {}).get("config_file")
    if config_path(config_file).exists() or config_file:
        return load_config(config_file)
    return None


def _state_store_url(ctx: click.Context, url: str | None) -> str:
    if url:
        return url
    config = _config(ctx)
    if config is not None:
        return config.state_store
    from_env = os.environ.get(STATE_STORE_ENV)
    if from_env:
        return from_env
    raise ConfigError(
        f"no state store given: pass --url, set {STATE_STORE_ENV}, or run where '{config_path(None)}' exists "
        "(or pass --config)"
    )


@click.group()
def db() -> None:
    """Inspect or migrate the state database (checkpoints, run history, leases)."""


@db.command()
@_url_option
@click.pass_context
def upgrade(ctx: click.Context, url: str | None) -> None:
    """Apply pending schema migrations and print the resulting revision."""
    from sharesync.state.database import display, parse_url
    from sharesync.state.migrate import upgrade as upgrade_schema

    target = _state_store_url(ctx, url)
    before, after = upgrade_schema(target)
    shown = display(parse_url(target))
    if before == after:
        click.echo(f"{shown}: already at revision {after} (head)")
    else:
        click.echo(f"{shown}: upgraded from {before or 'empty'} to revision {after} (head)")


@db.command()
@_url_option
@click.pass_context
def current(ctx: click.Context, url: str | None) -> None:
    """Print the database's schema revision without changing anything."""
    from sharesync.state.database import display, parse_url
    from sharesync.state.migrate import current_revision
    from sharesync.state.revisions import head_revision

    target = _state_store_url(ctx, url)
    revision = current_revision(target)
    head = head_revision()
    shown = display(parse_url(target))
    if revision is None:
        click.echo(f"{shown}: empty (no schema yet; 'sharesync db upgrade' or any sync creates it, head is {head})")
    elif revision == head:
        click.echo(f"{shown}: revision {revision} (head)")
    else:
        click.echo(f"{shown}: revision {revision} (head is {head}; run 'sharesync db upgrade')")


@db.command()
@_url_option
@click.option(
    "--days",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Keep this many days of run history (default: the config's run_history_days).",
)
@click.pass_context
def prune(ctx: click.Context, url: str | None, days: float | None) -> None:
    """Delete finished runs older than the retention, of every table; each table's last
    succeeded and last failed run stay."""
    from datetime import timedelta

    from sharesync.state.database import display, parse_url
    from sharesync.state.store import open_store

    target = _state_store_url(ctx, url)
    if days is None:
        config = _config(ctx)
        days = (
            config.run_history_days if config is not None else SharesyncConfig.model_fields["run_history_days"].default
        )
    if not days:
        raise ConfigError("run_history_days is 0 (keep the run history forever): pass --days N to prune anyway")
    removed = open_store(target).prune_runs(timedelta(days=days))
    click.echo(
        f"{display(parse_url(target))}: removed {removed} run{'s' * (removed != 1)} older than {days:g} days "
        "(each table's last succeeded and last failed run kept)"
    )


@db.command()
@_url_option
@click.option(
    "--from-targets",
    "from_targets",
    is_flag=True,
    help="Rebuild from the records in each target's Delta log (the only source there is; implied).",
)
@click.pass_context
def recover(ctx: click.Context, url: str | None, from_targets: bool) -> None:
    """Rebuild the checkpoints of every configured table from what its target records: after the
    state database was lost, or restored from an older backup. Checkpoints ahead of their target
    are left to the next sync's target check."""
    from sharesync.pipelines.modes.registry import BUILTIN_MODES
    from sharesync.pipelines.run.resume import resume_from_target
    from sharesync.state.database import display, parse_url
    from sharesync.state.store import open_store
    from sharesync.sync.core.location import locate

    del from_targets  # the targets are the only source there is
    config = _config(ctx)
    if config is None:
        raise ConfigError("db recover needs the config file: it names the tables and their targets (pass --config)")
    target_url = url or config.state_store
    store = open_store(target_url)
    click.echo(f"{display(parse_url(target_url))}: checkpoints from the targets' own records")
    for table in config.tables:
        checkpoint = store.get_checkpoint(table.key)
        before = "none" if checkpoint is None else str(checkpoint.version)
        target, staging = locate(table.target, config.storage), locate(config.staging_dir, config.storage)
        resumed = resume_from_target(
            store, table, target, checkpoint, config.storage, staging, BUILTIN_MODES.strategy(table)
        )
        if resumed is not None:
            click.echo(f"{table.key}: checkpoint at version {resumed.checkpoint.version} (was {before})")
        else:
            had = "no checkpoint" if checkpoint is None else f"version {before}"
            click.echo(f"{table.key}: unchanged ({had}; the target records nothing newer)")
