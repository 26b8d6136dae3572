"""``sharesync sync | status | backfill | reset``: the syncer's commands.

Each loads the config, builds one :class:`sharesync.pipelines.run.sync_pass.Syncer` and prints what
happened: the results table on stdout, each error on stderr. ``sync`` exits 1 when any table
failed (the others still ran), 2 when a table's config turned out wrong against the shared table
(a key or column it lacks; the others still ran); config, profile and state-store problems exit
2 through :func:`sharesync.sync.cli.main.main`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from sharesync.sync.cli.main import EXIT_OK, EXIT_TABLE_FAILED, EXIT_USAGE
from sharesync.sync.cli.progress import Display
from sharesync.sync.cli.rendering import print_pass, print_results, print_statuses
from sharesync.sync.cli.repeat import (
    MIN_INTERVAL_SECONDS,
    StopRequest,
    parse_interval,
    passes_done_before,
    run_passes,
    stop_on_signals,
)
from sharesync.sync.cli.restart import restart_if_due
from sharesync.sync.core.config import SharesyncConfig, config_path, load_config
from sharesync.sync.core.errors import ConfigError, SharesyncError
from sharesync.sync.core.redact import redact
from sharesync.sync.core.storage import StorageSection
from sharesync.sync.core.timestamps import given_timestamp

if TYPE_CHECKING:
    from sharesync.pipelines.jobs.session import SparkEngine
    from sharesync.pipelines.run.results import TableSyncResult
    from sharesync.pipelines.run.services import ProgressFactory
    from sharesync.pipelines.run.sync_pass import Syncer


def _config(ctx: click.Context) -> SharesyncConfig:
    return load_config(ctx.obj["config_file"])


def _config_to_sync(ctx: click.Context) -> SharesyncConfig:
    """The config of a pass, which must name something to sync (``discover`` and ``status`` take an empty one)."""
    config = _config(ctx)
    if not config.tables and not config.include:
        raise ConfigError(
            f"{config_path(ctx.obj['config_file'])}: tables: no table listed and no include: pattern, so there "
            "is nothing to sync; add tables ('sharesync discover --config' prints entries ready to paste)"
        )
    return config


@contextmanager
def _syncer(
    ctx: click.Context,
    *,
    progress: bool = False,
    config: SharesyncConfig | None = None,
    engine: SparkEngine | None = None,
) -> Iterator[Syncer]:
    from sharesync.pipelines.run.sync_pass import Syncer

    config = config or _config(ctx)
    display = Display() if progress and sys.stderr.isatty() else None
    factory: ProgressFactory | None = display.download if display is not None else None
    watch = display.table if display is not None else None
    try:
        with Syncer(config, progress=factory, watch=watch, engine=engine) as syncer:
            yield syncer
    finally:
        if display is not None:
            display.stop()


@click.command("sync")
@click.argument("names", nargs=-1)
@click.option(
    "--parallel",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Sync up to N tables at once (default: defaults.max_parallel_tables, else the CPU count, at most 8).",
)
@click.option(
    "--every",
    default=None,
    metavar="INTERVAL",
    help="Keep running: a pass every INTERVAL (30s, 5m, 1h) in one process that keeps its engine; "
    "Ctrl+C or SIGTERM stops after the running pass.",
)
@click.option(
    "--passes", type=click.IntRange(min=1), default=None, metavar="N", help="With --every: stop after N passes."
)
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"tables": [...]} (with --every: a line per pass).')
@click.option(
    "--max-rss-mib",
    type=click.IntRange(min=0),
    default=2048,
    show_default=True,
    metavar="MIB",
    help="With --every: before a pass, a process holding more memory than this restarts itself "
    "(same command and PID; 0: never).",
)
@click.pass_context
def sync_command(
    ctx: click.Context,
    names: tuple[str, ...],
    parallel: int | None,
    every: str | None,
    passes: int | None,
    as_json: bool,
    max_rss_mib: int,
) -> None:
    """One sync pass over all (or the named) tables; with --every, one pass after another."""
    if every is None:
        if passes is not None:
            raise click.UsageError("--passes counts the passes of --every; add --every INTERVAL")
        if ctx.get_parameter_source("max_rss_mib") is not ParameterSource.DEFAULT:
            raise click.UsageError("--max-rss-mib bounds the process of --every; add --every INTERVAL")
        with _syncer(ctx, progress=not as_json, config=_config_to_sync(ctx)) as syncer:
            results = syncer.sync_all(list(names) or None, parallel=parallel)
        _report(results, as_json=as_json)
        return
    try:
        interval = parse_interval(every)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--every") from None
    if interval < MIN_INTERVAL_SECONDS:
        # 0s would start pass after pass with no pause: a busy loop on the provider and the state store.
        raise click.BadParameter(f"{every!r} is under one second; use 1s or more (e.g. 30s)", param_hint="--every")
    code = _sync_every(ctx, list(names) or None, parallel, interval, passes, max_rss_mib, as_json=as_json)
    if code != EXIT_OK:
        sys.exit(code)


def _sync_every(
    ctx: click.Context,
    names: list[str] | None,
    parallel: int | None,
    every: float,
    passes: int | None,
    max_rss_mib: int,
    *,
    as_json: bool = False,
) -> int:
    """Passes until stopped; the exit code of the last one (``as_json``: a JSON line per pass).

    Each pass reads the config and the profile again (an edited table list, a rotated token);
    the Spark engine (its session; rebuilt when ``spark:`` changes) and the state store's pool
    outlive the pass. A pass that
    cannot start (the config edited into an error, the state store down) is reported and the
    next one tries again — except the first: what is wrong at start is a usage error (exit 2).
    Before a pass (not the first of this process) the process restarts itself when it holds
    more than ``max_rss_mib``, or when the config's ``storage:`` changed (the embedded engine
    keeps the settings it started with) — only as the console script (``ctx.obj["restartable"]``),
    never inside a caller's process.
    """
    stop = StopRequest()
    last = EXIT_OK
    done = passes_done_before()
    restartable = bool(ctx.obj.get("restartable"))
    started_with: StorageSection | None = None  # the storage settings of this process's first pass
    engine: SparkEngine | None = None  # the one the passes share, while the config's spark: is unchanged

    def one_pass(number: int) -> None:
        nonlocal last, started_with, engine
        started = time.monotonic()
        try:
            config = _config_to_sync(ctx)
            if restartable and number > done + 1:
                restart_if_due(number, config, started_with, max_rss_mib, first_here=done + 1)
            if started_with is None:
                started_with = config.storage
            engine = _engine_for(config, engine)
            with _syncer(ctx, progress=True, config=config, engine=engine) as syncer:
                results = syncer.sync_all(names, parallel=parallel)
        except SharesyncError as exc:
            if number == 1:
                raise
            click.echo(f"error: pass {number}: {redact(str(exc))}; the next pass tries again", err=True)
            last = EXIT_USAGE
            return
        if as_json:
            click.echo(json.dumps({"pass": number, "tables": [r.to_json() for r in results]}))
        else:
            print_pass(number, results, time.monotonic() - started)
        last = _exit_code(results)

    try:
        with stop_on_signals(stop, _announce):
            run_passes(one_pass, every, stop, passes=passes, first=done + 1)
    finally:
        if engine is not None:
            engine.close()
    return last


def _engine_for(config: SharesyncConfig, current: SparkEngine | None) -> SparkEngine:
    """The Spark engine of the passes: kept while the config's ``spark:`` and ``storage:`` stay the same."""
    from sharesync.pipelines.jobs.session import SparkEngine

    if current is not None and (current.config, current.storage) == (config.spark, config.storage):
        return current
    if current is not None:
        current.close()
    return SparkEngine(config.spark, config.storage)


def _announce(message: str) -> None:
    """From a signal handler: straight to the file descriptor, no stream lock (see StopRequest)."""
    os.write(sys.stderr.fileno(), f"{message}\n".encode())


def _exit_code(results: Sequence[TableSyncResult]) -> int:
    """2 when a table's config is wrong for it (e.g. a key the shared table lacks), 1 when a table failed."""
    from sharesync.pipelines.run.results import TableOutcome

    failed = [r for r in results if r.outcome is TableOutcome.FAILED]
    if any(isinstance(r.exception, ConfigError) for r in failed):
        return EXIT_USAGE
    return EXIT_TABLE_FAILED if failed else EXIT_OK


def _report(results: Sequence[TableSyncResult], *, as_json: bool = False) -> None:
    """Print the results (a table, or JSON); exit with :func:`_exit_code`."""
    if as_json:
        click.echo(json.dumps({"tables": [r.to_json() for r in results]}, indent=2))
    else:
        print_results(results)
    code = _exit_code(results)
    if code != EXIT_OK:
        sys.exit(code)


@click.command("backfill")
@click.argument("name")
@click.option("--from", "from_", required=True, help="Replay changes committed at or after this timestamp.")
@click.option("--to", "to", default=None, help="Stop at the last version committed at or before this timestamp.")
@click.option("--full-refresh", is_flag=True, help="Re-bootstrap from the snapshot at --from instead of replaying.")
@click.option(
    "--discard-target", is_flag=True, help="With --full-refresh: also drop an append table's change log before --from."
)
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"tables": [...]}.')
@click.pass_context
def backfill_command(
    ctx: click.Context, name: str, from_: str, to: str | None, full_refresh: bool, discard_target: bool, as_json: bool
) -> None:
    """Re-apply a table's changes from a timestamp, then continue normally."""
    from sharesync.pipelines.run.sync_pass import BackfillRequest

    request = BackfillRequest(
        given_timestamp("--from", from_), given_timestamp("--to", to) if to else None, full_refresh, discard_target
    )
    with _syncer(ctx, progress=not as_json) as syncer:
        result = syncer.backfill(name, request)
    _report([result], as_json=as_json)


@click.command("reset")
@click.argument("name")
@click.option("--discard-target", is_flag=True, help="Also remove the target table (an append log or history too).")
@click.pass_context
def reset_command(ctx: click.Context, name: str, discard_target: bool) -> None:
    """Forget a table's checkpoint: the next sync bootstraps it from a snapshot (an append or
    history target keeps its rows and continues, unless --discard-target removes it)."""
    with _syncer(ctx) as syncer:
        removed, discarded = syncer.reset(name, discard_target=discard_target)
        keeps = syncer.resources.modes.strategy(syncer.table(name)).keeps is not None
    said = "no checkpoint" if removed is None else f"checkpoint at version {removed.version} removed"
    if discarded is not None:
        said += f"; {discarded.describe()}"
    elif discard_target:
        said += "; no target table to remove"
    elif keeps:  # what only the target holds stays (docs/modes.md, "Reset and full refresh")
        said += "; the target keeps its rows, which the next sync continues (--discard-target removes them)"
    click.echo(f"{name}: {said}; the next sync bootstraps")


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def status_command(ctx: click.Context, as_json: bool) -> None:
    """Each table's checkpoint, the provider's version, lag and last run."""
    from sharesync.pipelines.commands.status import table_statuses
    from sharesync.sync.protocol.profile import load_profile

    config = _config(ctx)
    providers = config.all_providers()
    if len(providers) == 1:  # its mistake stops status before the state store is opened (or created)
        load_profile(next(iter(providers.values())).profile)
    with _syncer(ctx, config=config) as syncer:
        rows, warnings = table_statuses(syncer)
    if as_json:
        click.echo(json.dumps({"tables": [row.to_json() for row in rows], "warnings": warnings}, indent=2))
        return
    print_statuses(rows, warnings)
