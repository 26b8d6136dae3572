"""``sharesync discover``: every table the profile can read, with what a sync config needs.

For each table: its current version, whether change data feed is on (the config's ``merge``
and ``append`` modes need it) and its partition columns (useful ``where`` filters). Metadata
is fetched concurrently, one request per table, so a provider with hundreds of tables answers
in seconds. Any failure exits 2 with one line: discover is a setup command, so a bad profile,
an expired token, an unreachable endpoint or an unknown table all mean "fix the setup".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass

import click

from sharesync.sync.core.config import load_config
from sharesync.sync.protocol.client import SharingClient, TableMetadata, TableRef
from sharesync.sync.protocol.profile import load_profile


@dataclass(frozen=True)
class DiscoveredTable:
    name: str
    version: int
    cdf_enabled: bool
    partition_columns: list[str]

    @classmethod
    def of(cls, meta: TableMetadata) -> DiscoveredTable:
        return cls(str(meta.table), meta.version, meta.cdf_enabled, meta.partition_columns)


def discover_tables(client: SharingClient, names: Sequence[str] = (), *, workers: int = 8) -> list[DiscoveredTable]:
    """The named tables (default: every table of every share), sorted by name."""
    refs = [TableRef.of(n) for n in names] or [
        TableRef.of(table) for share in client.iter_shares() for table in client.list_all_tables(share.name)
    ]
    if not refs:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(refs))), thread_name_prefix="discover") as pool:
        futures = [pool.submit(client.metadata, ref) for ref in refs]
        done, pending = wait(futures, return_when=FIRST_EXCEPTION)
        for future in pending:
            future.cancel()
        for future in futures:  # in input order, so the first failing table is the one reported
            error = future.exception() if future in done else None
            if error is not None:
                raise error
        tables = [DiscoveredTable.of(f.result()) for f in futures]
    return sorted(tables, key=lambda t: t.name.lower())


def _table_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    for name in value:
        try:
            TableRef.of(name)
        except ValueError:
            raise click.BadParameter(f"'{name}' is not 'share.schema.table'") from None
    return value


@click.command()
@click.argument("tables", nargs=-1, callback=_table_names, metavar="[SHARE.SCHEMA.TABLE]...")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: {\"tables\": [...]}.")
@click.option("--workers", type=click.IntRange(1, 64), default=8, show_default=True, help="Concurrent metadata requests.")
@click.pass_context
def discover(ctx: click.Context, tables: tuple[str, ...], as_json: bool, workers: int) -> None:
    """List the shared tables (all, or the ones named) with version, CDF and partition columns."""
    # Every failure here is a SharesyncError: the sharesync group (sharesync.sync.cli.main) prints it, exit 2.
    config = load_config((ctx.obj or {}).get("config_file"))
    profile = load_profile(config.profile)
    with SharingClient(profile, ca_bundle=config.ca_bundle) as client:
        found = discover_tables(client, tables, workers=workers)
    if as_json:
        click.echo(json.dumps({"tables": [asdict(t) for t in found]}, indent=2))
    else:
        _print_table(found)


def _print_table(found: list[DiscoveredTable]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not found:
        console.print("No tables are shared with this profile.")
        return
    table = Table(title=f"{len(found)} shared table{'s' if len(found) != 1 else ''}")
    table.add_column("table")
    table.add_column("version", justify="right")
    table.add_column("CDF")
    table.add_column("partition columns")
    for t in found:
        table.add_row(t.name, str(t.version), "yes" if t.cdf_enabled else "no", ", ".join(t.partition_columns) or "—")
    console.print(table)
