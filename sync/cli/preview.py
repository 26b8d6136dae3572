"""``sharesync preview NAME``: the first rows of a live shared table, without syncing."""

from __future__ import annotations

import json

import click
from pydantic import TypeAdapter, ValidationError

from sharesync.sync.cli.discover import table_name
from sharesync.sync.core.config import format_validation_error, load_config
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.predicates import Predicate

_PREDICATES = TypeAdapter(list[Predicate])


@click.command("preview")
@click.argument("name", callback=table_name)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--where", "where_json", default=None, help='Filter as JSON, e.g. \'[{"col": "region", "op": "eq", "val": "eu"}]\'.'
)
@click.option("--version", default=None, type=click.IntRange(min=0), help="Time-travel to this table version.")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON lines.")
@click.option("--provider", default=None, help="The config's provider that shares it (default: the first).")
@click.pass_context
def preview(
    ctx: click.Context,
    name: str,
    limit: int,
    where_json: str | None,
    version: int | None,
    as_json: bool,
    provider: str | None,
) -> None:
    """Show the first matching rows of a shared table (no sync, no state)."""
    from sharesync.pipelines.run.clients import make_client
    from sharesync.sync.staging.first_rows import preview as run_preview

    config = load_config(ctx.obj["config_file"])
    where = _parse_where(where_json) if where_json else None
    known = list(config.all_providers())
    if provider is not None and provider not in known:
        raise click.BadParameter(f"'{provider}' is not a provider of the config (known: {', '.join(known)})")
    with make_client(config, provider or known[0]) as client:
        result = run_preview(client, name, limit=limit, where=where, version=version, ca_bundle=config.ca_bundle)
    rows = result.table.to_pylist()
    if as_json:
        for row in rows:
            click.echo(json.dumps(row, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    title = f"{name} @ version {result.version}"
    cells = [["∅" if v is None else str(v) for v in row.values()] for row in rows]
    table = Table(*result.table.column_names, title=title)
    for row_cells in cells:
        table.add_row(*row_cells)
    names = result.table.column_names
    needed = sum(max([len(n), *(len(r[i]) for r in cells)]) for i, n in enumerate(names)) + 3 * len(names) + 1
    if needed <= console.width:  # every value fits uncut
        console.print(table)
    else:  # too many columns for the terminal: one block per row, every value in full
        console.print(f"[bold]{title}[/bold]")
        width = max(map(len, result.table.column_names), default=0)
        for number, row_cells in enumerate(cells, 1):
            console.rule(f"row {number}", align="left")
            for column, cell in zip(result.table.column_names, row_cells, strict=True):
                console.print(f"{column:>{width}}  {cell}", highlight=False, soft_wrap=True)
    console.print(
        f"{len(rows)} rows; files: {result.files_listed} listed, {result.files_pruned} pruned by stats, "
        f"{result.files_downloaded} downloaded"
    )


def _parse_where(text: str) -> list[Predicate]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f'--where is not JSON ({exc.msg}); pass a list like \'[{{"col": "id", "op": "gt", "val": 5}}]\''
        ) from None
    if isinstance(raw, dict):
        raw = [raw]
    try:
        return _PREDICATES.validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(f"--where: {format_validation_error(exc)}") from None
