"""How the syncer's commands print results: the results table, a pass line, the status table.

Tables go to stdout; errors to stderr; messages and names are printed as written (:func:`esc`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

    from sharesync.pipelines.commands.status import TableStatus
    from sharesync.pipelines.run.results import TableSyncResult


def print_pass(number: int, results: Sequence[TableSyncResult], seconds: float) -> None:
    """One line per pass (a log that shows the loop is alive), then the tables that did something."""
    from sharesync.pipelines.run.results import TableOutcome

    order = (
        TableOutcome.SYNCED,
        TableOutcome.FAILED,
        TableOutcome.UP_TO_DATE,
        TableOutcome.REMOVED,
        TableOutcome.NEEDS_KEYS,
    )
    counts = {outcome: sum(r.outcome is outcome for r in results) for outcome in order}
    summary = ", ".join(f"{n} {outcome.value.replace('_', ' ')}" for outcome, n in counts.items() if n) or "no tables"
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    click.echo(f"{now} UTC pass {number}: {summary} ({seconds:.2f} s)")
    busy = [r for r in results if not _quiet(r)]
    if busy:
        print_results(busy)


def print_statuses(rows: Sequence[TableStatus], warnings: Sequence[str]) -> None:
    """``status``'s table: a row per table, then each provider state, error and warning in full."""
    from rich.console import Console

    from sharesync.sync.cli.fit import Col, Kind, fitted_table

    several = len({r.provider_name for r in rows}) > 1  # a config with several providers: which one
    cols = [
        *([Col("provider")] if several else []),
        Col("table"),
        Col("mode", Kind.WORD),
        Col("ckpt/source", Kind.NUMBER),
        Col("lag", Kind.NUMBER),
        Col("last sync UTC", Kind.WORD, optional=True),
        Col("last run", Kind.WORD, optional=True),
    ]
    cells = [
        [
            *([esc(row.provider_name)] if several else []),
            esc(row.name),
            row.mode.value if row.mode is not None else "-",
            f"{_show(row.checkpoint_version)}/{_source(row)}",
            _show(row.lag_versions),
            _show(row.last_sync_at),
            _show(row.last_status),
        ]
        for row in rows
    ]
    console = Console()
    table = fitted_table(cols, cells, console.width)
    console.print(table)
    for row in rows:
        if row.note:  # a pattern's table the pass does not sync: why, and what to do
            console.print(f"[yellow]note:[/yellow] {esc(row.name)}: {esc(row.note)}", highlight=False, soft_wrap=True)
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


# Above this many quiet tables (up to date, no warning), a pass's table lists only the others and
# counts the quiet ones in a line: a thousand "up to date" rows hide the three that changed.
QUIET_ROWS_SHOWN = 20


def print_results(results: Sequence[TableSyncResult], console: Console | None = None) -> None:
    """One row per table (fits the terminal, 80 columns when piped: :mod:`~sharesync.sync.cli.fit`),
    then each warning in full on its own line; errors go to stderr the same way."""
    from rich.console import Console

    from sharesync.pipelines.run.results import TableOutcome
    from sharesync.sync.cli.fit import Col, Kind, fitted_table

    console = console or Console()
    quiet = [r for r in results if _quiet(r)]
    if len(quiet) > QUIET_ROWS_SHOWN:
        results = [r for r in results if not _quiet(r)]
    cols = [
        Col("table"),
        Col("result", Kind.WORD),
        Col("versions", Kind.NUMBER),
        Col("changes", Kind.NUMBER),
        Col("files", Kind.NUMBER, optional=True),
        Col("MB", Kind.NUMBER, optional=True),
        Col("s", Kind.NUMBER, optional=True),
    ]
    shown = {
        TableOutcome.UP_TO_DATE: "up to date",
        TableOutcome.SYNCED: "synced",
        TableOutcome.FAILED: "[red]FAILED[/red]",
        TableOutcome.REMOVED: "[yellow]removed at provider[/yellow]",
        TableOutcome.NEEDS_KEYS: "[yellow]needs keys[/yellow]",
    }
    cells = [
        [
            esc(r.name),
            shown[r.outcome],
            f"{r.first_version}..{r.checkpoint_version}" if r.batches else _show(r.checkpoint_version),
            r.changes.describe(compact=True) if r.batches else "-",
            str(r.stats.files_downloaded),
            f"{r.stats.bytes_downloaded / 1e6:.1f}",
            f"{r.seconds:.1f}",
        ]
        for r in results
    ]
    table = fitted_table(cols, cells, console.width)
    if results:
        console.print(table)
    if len(quiet) > QUIET_ROWS_SHOWN:
        console.print(f"{len(quiet)} tables up to date ('sharesync status' lists every table)", highlight=False)
    errors = Console(stderr=True, width=console.width) if any(r.error for r in results) else None
    for r in results:
        if r.error and errors is not None:
            errors.print(f"[red]error:[/red] {esc(r.name)}: {esc(r.error)}", highlight=False, soft_wrap=True)
        for warning in r.warnings:
            console.print(f"[yellow]warning:[/yellow] {esc(r.name)}: {esc(warning)}", highlight=False, soft_wrap=True)
        if r.compaction:
            console.print(f"{esc(r.name)}: {esc(r.compaction)}", highlight=False, soft_wrap=True)


def _quiet(result: TableSyncResult) -> bool:
    """Up to date with nothing to say: what a pass's listing may leave out."""
    from sharesync.pipelines.run.results import TableOutcome

    return result.outcome is TableOutcome.UP_TO_DATE and not result.warnings


def esc(text: str) -> str:
    """Text from messages and names, printed as is: rich would read '[rel.s.t]' as a style tag and drop it."""
    from rich.markup import escape

    return escape(text)


def _source(row: TableStatus) -> str:
    """The provider's side of a status row: its version, or why there is none."""
    if row.removed_at_provider:
        return "removed at provider"
    if row.needs_keys:
        return "needs keys"
    return _show(row.source_version) if row.provider_error is None else row.provider.value


def _show(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
    return str(value)
