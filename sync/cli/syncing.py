"""``sharesync sync | status | backfill | reset``: the engine's commands.

Each loads the config, builds one :class:`sharesync.pipelines.run.engine.SyncEngine` and prints what
happened: the results table on stdout, each error on stderr. ``sync`` exits 1 when any table
failed (the others still ran), 2 when a table's config turned out wrong against the shared table
(a key or column it lacks; the others still ran); config, profile and state-store problems exit
2 through :func:`sharesync.sync.cli.main.main`.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from sharesync.sync.cli.main import EXIT_OK, EXIT_TABLE_FAILED, EXIT_USAGE
from sharesync.sync.cli.repeat import (
    RestartProcess,
    StopRequest,
    parse_interval,
    passes_done_before,
    resident_mib,
    run_passes,
    stop_on_signals,
)
from sharesync.sync.core.config import Mode, SharesyncConfig, load_config
from sharesync.sync.core.errors import ConfigError, SharesyncError
from sharesync.sync.core.redact import redact
from sharesync.sync.core.storage import StorageSection
from sharesync.sync.core.timestamps import parse_timestamp

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.progress import Progress, ProgressColumn, Task

    from sharesync.pipelines.run.engine import SyncEngine
    from sharesync.pipelines.run.results import TableSyncResult, TargetChanges
    from sharesync.pipelines.run.services import ProgressFactory
    from sharesync.sync.protocol.download import ProgressCallback, ProgressUpdate


def _config(ctx: click.Context) -> SharesyncConfig:
    return load_config(ctx.obj["config_file"])


@contextmanager
def _engine(
    ctx: click.Context, *, progress: bool = False, config: SharesyncConfig | None = None
) -> Iterator[SyncEngine]:
    from sharesync.pipelines.run.engine import SyncEngine

    config = config or _config(ctx)
    display = _Display() if progress and sys.stderr.isatty() else None
    factory: ProgressFactory | None = display.download if display is not None else None
    watch = display.table if display is not None else None
    try:
        with SyncEngine(config, progress=factory, watch=watch) as engine:
            yield engine
    finally:
        if display is not None:
            display.stop()


class _Display:
    """Rich progress on a terminal: a row per table while it syncs, a bar per batch while it downloads.

    Nothing is drawn (or imported) until a table has something to do, so a pass with nothing
    new shows nothing; rows go when their table or download is done. Tables syncing in parallel
    call in from their own threads (rich's Progress takes its own lock).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bars: Progress | None = None

    def _progress(self) -> Progress:
        with self._lock:
            if self._bars is None:
                from rich.progress import (
                    BarColumn,
                    DownloadColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                    TransferSpeedColumn,
                )

                self._bars = Progress(
                    TextColumn("{task.description}"),
                    BarColumn(),
                    _on_downloads(DownloadColumn()),
                    _on_downloads(TransferSpeedColumn()),
                    TimeElapsedColumn(),
                    transient=True,
                )
                self._bars.start()
            return self._bars

    @contextmanager
    def table(self, name: str) -> Iterator[None]:
        progress = self._progress()
        task = progress.add_task(f"{name}: syncing", total=None)
        try:
            yield
        finally:
            progress.remove_task(task)

    def download(self, label: str, files: int) -> ProgressCallback:
        progress = self._progress()
        task = progress.add_task(f"  {label}", total=None, download=True)
        done = False

        def update(event: ProgressUpdate) -> None:
            nonlocal done
            if done:
                return
            progress.advance(task, event.advance)
            if event.advance == 0 and event.files_done == event.files_total:  # the batch's last file is in
                done = True
                progress.remove_task(task)

        return update

    def stop(self) -> None:
        if self._bars is not None:
            self._bars.stop()


def _on_downloads(column: ProgressColumn) -> ProgressColumn:
    """``column`` on a download's row, blank on a table's row."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class OnDownloads(ProgressColumn):
        def render(self, task: Task) -> RenderableType:
            return column.render(task) if task.fields.get("download") else Text("")

    return OnDownloads()


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
    max_rss_mib: int,
) -> None:
    """One sync pass over all (or the named) tables; with --every, one pass after another."""
    if every is None:
        if passes is not None:
            raise click.UsageError("--passes counts the passes of --every; add --every INTERVAL")
        with _engine(ctx, progress=True) as engine:
            results = engine.sync_all(list(names) or None, parallel=parallel)
        _report(results)
        return
    try:
        interval = parse_interval(every)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--every") from None
    code = _sync_every(ctx, list(names) or None, parallel, interval, passes, max_rss_mib)
    if code != EXIT_OK:
        sys.exit(code)


def _sync_every(
    ctx: click.Context,
    names: list[str] | None,
    parallel: int | None,
    every: float,
    passes: int | None,
    max_rss_mib: int,
) -> int:
    """Passes until stopped; the exit code of the last one.

    Each pass reads the config and the profile again (an edited table list, a rotated token);
    the Spark session, the engine and the state store's pool outlive the pass. A pass that
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

    def one_pass(number: int) -> None:
        nonlocal last, started_with
        started = time.monotonic()
        try:
            config = _config(ctx)
            if restartable and number > done + 1:
                _restart_if_due(number, config, started_with, max_rss_mib, first_here=done + 1)
            if started_with is None:
                started_with = config.storage
            with _engine(ctx, progress=True, config=config) as engine:
                results = engine.sync_all(names, parallel=parallel)
        except SharesyncError as exc:
            if number == 1:
                raise
            click.echo(f"error: pass {number}: {redact(str(exc))}; the next pass tries again", err=True)
            last = EXIT_USAGE
            return
        _print_pass(number, results, time.monotonic() - started)
        last = _exit_code(results)

    with stop_on_signals(stop, _announce):
        run_passes(one_pass, every, stop, passes=passes, first=done + 1)
    return last


def _restart_if_due(
    number: int, config: SharesyncConfig, storage: StorageSection | None, max_rss_mib: int, *, first_here: int
) -> None:
    """Raise :class:`RestartProcess` before pass ``number`` when this process should not run it."""
    if storage is not None and config.storage != storage:
        raise RestartProcess(
            number - 1, "the config's storage settings changed; the engine keeps the ones it started with"
        )
    resident = resident_mib() if max_rss_mib > 0 else None
    if resident is None or resident <= max_rss_mib:
        return
    if number == first_here + 1 and first_here > 1:  # a fresh process was above the bound after one pass
        click.echo(
            f"warning: --max-rss-mib {max_rss_mib} is below what one pass leaves in a fresh process "
            f"({resident:.0f} MiB): every pass restarts the process; raise the bound",
            err=True,
        )
    raise RestartProcess(number - 1, f"{resident:.0f} MiB resident, above --max-rss-mib {max_rss_mib}")


def _announce(message: str) -> None:
    """From a signal handler: straight to the file descriptor, no stream lock (see StopRequest)."""
    os.write(sys.stderr.fileno(), f"{message}\n".encode())


def _print_pass(number: int, results: Sequence[TableSyncResult], seconds: float) -> None:
    """One line per pass (a log that shows the loop is alive), then the tables that did something."""
    from sharesync.pipelines.run.results import TableOutcome

    order = (TableOutcome.SYNCED, TableOutcome.FAILED, TableOutcome.UP_TO_DATE)
    counts = {outcome: sum(r.outcome is outcome for r in results) for outcome in order}
    summary = ", ".join(f"{n} {outcome.value.replace('_', ' ')}" for outcome, n in counts.items() if n) or "no tables"
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    click.echo(f"{now} UTC pass {number}: {summary} ({seconds:.2f} s)")
    busy = [r for r in results if r.outcome is not TableOutcome.UP_TO_DATE or r.warnings]
    if busy:
        print_results(busy)


def _exit_code(results: Sequence[TableSyncResult]) -> int:
    """2 when a table's config is wrong for it (e.g. a key the shared table lacks), 1 when a table failed."""
    from sharesync.pipelines.run.results import TableOutcome

    failed = [r for r in results if r.outcome is TableOutcome.FAILED]
    if any(isinstance(r.exception, ConfigError) for r in failed):
        return EXIT_USAGE
    return EXIT_TABLE_FAILED if failed else EXIT_OK


def _report(results: Sequence[TableSyncResult]) -> None:
    """Print the results; exit with :func:`_exit_code`."""
    print_results(results)
    code = _exit_code(results)
    if code != EXIT_OK:
        sys.exit(code)


@click.command("backfill")
@click.argument("name")
@click.option("--from", "from_", required=True, help="Replay changes committed at or after this timestamp.")
@click.option("--to", "to", default=None, help="Stop at the last version committed at or before this timestamp.")
@click.option("--full-refresh", is_flag=True, help="Re-bootstrap from the snapshot at --from instead of replaying.")
@click.pass_context
def backfill_command(ctx: click.Context, name: str, from_: str, to: str | None, full_refresh: bool) -> None:
    """Re-apply a table's changes from a timestamp, then continue normally."""
    from sharesync.pipelines.run.engine import BackfillRequest

    request = BackfillRequest(_timestamp("--from", from_), _timestamp("--to", to) if to else None, full_refresh)
    with _engine(ctx, progress=True) as engine:
        result = engine.backfill(name, request)
    _report([result])


@click.command("reset")
@click.argument("name")
@click.pass_context
def reset_command(ctx: click.Context, name: str) -> None:
    """Forget a table's checkpoint: the next sync bootstraps it from a snapshot."""
    with _engine(ctx) as engine:
        removed = engine.reset(name)
    if removed is None:
        click.echo(f"{name}: no checkpoint (nothing to reset)")
    else:
        click.echo(f"{name}: checkpoint at version {removed.version} removed; the next sync bootstraps")


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.pass_context
def status_command(ctx: click.Context, as_json: bool) -> None:
    """Each table's checkpoint, the provider's version, lag and last run."""
    from sharesync.pipelines.run.status import table_statuses

    with _engine(ctx) as engine:
        rows, warnings = table_statuses(engine)
    if as_json:
        click.echo(json.dumps({"tables": [row.to_json() for row in rows], "warnings": warnings}, indent=2))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("table", no_wrap=True, min_width=max((len(r.name) for r in rows), default=5))
    for name in ("mode", "ckpt/source", "lag", "last sync UTC", "last run"):
        table.add_column(name, no_wrap=True)
    for row in rows:
        source = _show(row.source_version) if row.provider_error is None else row.provider.value
        table.add_row(
            row.name,
            row.mode.value,
            f"{_show(row.checkpoint_version)}/{source}",
            _show(row.lag_versions),
            _show(row.last_sync_at),
            _show(row.last_status),
        )
    console = Console()
    console.print(table)
    for row in rows:
        if row.provider_error:  # the provider's state, not the table's: its checkpoint is as shown
            console.print(
                f"[yellow]provider {row.provider.value}:[/yellow] {esc(row.name)}: {esc(row.provider_error)}",
                highlight=False,
                soft_wrap=True,
            )
        if row.last_error:
            console.print(
                f"[red]last error:[/red] {esc(row.name)}: {esc(row.last_error)}", highlight=False, soft_wrap=True
            )
        if row.last_warning:
            console.print(
                f"[yellow]last warning:[/yellow] {esc(row.name)}: {esc(row.last_warning)}",
                highlight=False,
                soft_wrap=True,
            )
    for warning in warnings:
        console.print(f"[yellow]warning:[/yellow] {esc(warning)}", highlight=False, soft_wrap=True)


def print_results(results: Sequence[TableSyncResult], console: Console | None = None) -> None:
    """One narrow row per table (fits 80 columns; names never cut), then each warning in full on
    its own line, where a long message stays readable; errors go to stderr the same way."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from sharesync.pipelines.run.results import TableOutcome

    console = console or Console()
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("table", no_wrap=True, min_width=max((len(r.name) for r in results), default=5))
    table.add_column("result", no_wrap=True)
    table.add_column("versions", no_wrap=True)
    table.add_column("changes", no_wrap=True)
    table.add_column("files", justify="right", no_wrap=True)
    table.add_column("MB", justify="right", no_wrap=True)
    table.add_column("s", justify="right", no_wrap=True)
    shown = {
        TableOutcome.UP_TO_DATE: "up to date",
        TableOutcome.SYNCED: "synced",
        TableOutcome.FAILED: "[red]FAILED[/red]",
    }
    for r in results:
        stats = r.stats
        versions = f"{r.first_version}..{r.checkpoint_version}" if r.batches else _show(r.checkpoint_version)
        table.add_row(
            r.name,
            shown[r.outcome],
            versions,
            _changes(r.changes) if r.batches else "-",
            str(stats.files_downloaded),
            f"{stats.bytes_downloaded / 1e6:.1f}",
            f"{r.seconds:.1f}",
        )
    console.print(table)
    errors = Console(stderr=True, width=console.width) if any(r.error for r in results) else None
    for r in results:
        if r.error and errors is not None:
            errors.print(f"[red]error:[/red] {esc(r.name)}: {esc(r.error)}", highlight=False, soft_wrap=True)
        for warning in r.warnings:
            console.print(f"[yellow]warning:[/yellow] {esc(r.name)}: {esc(warning)}", highlight=False, soft_wrap=True)


def _changes(changes: TargetChanges) -> str:
    """What the batches did, in the mode's terms: keys (merge), change rows by type (append), rows
    (snapshot), rows opened and closed (history)."""
    match changes.mode:
        case Mode.MERGE:
            return f"+{changes.inserted} ~{changes.updated} -{changes.deleted} keys"
        case Mode.APPEND:
            from sharesync.sync.core.changefeed import ChangeType

            rows = changes.appended
            # An update is two rows (its pre- and post-image): "upd" counts rows, as the total does.
            kinds = {
                "ins": rows.get(ChangeType.INSERT, 0),
                "upd": rows.get(ChangeType.UPDATE_PREIMAGE, 0) + rows.get(ChangeType.UPDATE_POSTIMAGE, 0),
                "del": rows.get(ChangeType.DELETE, 0),
            }
            by_type = " ".join(f"{n} {kind}" for kind, n in kinds.items() if n)
            return f"{changes.appended_rows} rows appended" + (f"\n{by_type}" if by_type else "")
        case Mode.SNAPSHOT:
            return f"{changes.written} rows written"
        case Mode.HISTORY:
            return f"{changes.opened} opened\n{changes.closed} closed"
    raise AssertionError(changes.mode)  # pragma: no cover


def esc(text: str) -> str:
    """Text from messages and names, printed as is: rich would read '[rel.s.t]' as a style tag and drop it."""
    from rich.markup import escape

    return escape(text)


def _timestamp(option: str, value: str) -> datetime:
    try:
        return parse_timestamp(value)
    except ValueError as exc:
        raise ConfigError(f"{option}: {exc}") from None


def _show(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return str(value)
