"""``sharesync discover``: every table the profile can read, with what a sync config needs.

For each table: its current version, whether change data feed is on (the config's ``merge``
and ``append`` modes need it), its partition columns (useful ``where`` filters) and the Delta
reader features it uses (deletion vectors, column mapping: tables a provider answers in the
delta response format). Metadata is fetched concurrently, one request per table, so a provider
with hundreds of tables answers in seconds.

One table's failing metadata call (a reader feature sharesync cannot read, a provider error on
that table) does not hide the others: every table is listed, each failing one with its
redacted error (also on stderr), and the command exits 1. When nothing can be listed at all
(a bad profile, an expired token, an unreachable endpoint) it exits 2 with one line: that is
a setup problem.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace

import click

from sharesync.sync.cli.discovered import DiscoveredTable
from sharesync.sync.cli.main import EXIT_TABLE_FAILED
from sharesync.sync.core.config import SharesyncConfig, load_config
from sharesync.sync.core.errors import SharesyncError, printable
from sharesync.sync.core.providers import credentials_refused
from sharesync.sync.protocol.client import SharingClient, TableRef
from sharesync.sync.protocol.responses import ShareInfo


def _describe(client: SharingClient, ref: TableRef) -> DiscoveredTable:
    try:
        return DiscoveredTable.of(client.metadata(ref))
    except Exception as exc:  # noqa: BLE001 - one table's failure is that table's row, never the listing's end
        return DiscoveredTable.failed(ref, exc)


@dataclass(frozen=True)
class Discovered:
    """What one provider shares: its tables and what it says about their shares."""

    tables: list[DiscoveredTable]
    shares: list[ShareInfo]


def discover_tables(client: SharingClient, names: Sequence[str] = (), *, workers: int = 8) -> Discovered:
    """The named tables (default: every table of every share), sorted by name, failing ones
    included, and their shares (from the listing; named tables' shares asked for one by one)."""
    if names:
        refs = [TableRef.of(n) for n in names]
        shares = [_share(client, name) for name in dict.fromkeys(ref.share for ref in refs)]
    else:
        shares = [ShareInfo.of(share) for share in client.iter_shares()]
        refs = [TableRef.of(table) for share in shares for table in client.list_all_tables(share.name)]
    if not refs:
        return Discovered([], shares)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(refs))), thread_name_prefix="discover") as pool:
        tables = list(pool.map(lambda ref: _describe(client, ref), refs))
    return Discovered(sorted(tables, key=lambda t: t.name.lower()), shares)


def _share(client: SharingClient, name: str) -> ShareInfo:
    """A named table's share: its words are extras, so a share the provider will not describe
    (a table shared without its share listed, a failing call) is listed by name only."""
    try:
        return ShareInfo.of(client.get_share(name))
    except SharesyncError:
        return ShareInfo(name)


def table_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A click callback: ``value`` must be ``share.schema.table`` (a usage error otherwise)."""
    try:
        TableRef.of(value)
    except ValueError:
        raise click.BadParameter(f"'{value}' is not 'share.schema.table'") from None
    return value


def _table_names(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(table_name(ctx, param, name) for name in value)


@click.command()
@click.argument("tables", nargs=-1, callback=_table_names, metavar="[SHARE.SCHEMA.TABLE]...")
@click.option("--json", "as_json", is_flag=True, help='Print JSON: {"tables": [...]}.')
@click.option(
    "--workers", type=click.IntRange(1, 64), default=8, show_default=True, help="Concurrent metadata requests."
)
@click.option("--provider", "only", default=None, help="Only this provider of the config (default: all of them).")
@click.option(
    "--config", "as_config", is_flag=True, help="Print sharesync.yaml entries (tables: and include:), ready to paste."
)
@click.pass_context
def discover(
    ctx: click.Context, tables: tuple[str, ...], as_json: bool, workers: int, only: str | None, as_config: bool
) -> None:
    """List the shared tables (all, or the ones named): version, CDF, partition columns, reader features."""
    # A failure before any table is described is a SharesyncError: the sharesync group
    # (sharesync.sync.cli.main) prints it, exit 2. A failing table exits 1 after the listing.
    if as_json and as_config:
        raise click.UsageError("--json and --config are two ways to print the listing; choose one")
    config = load_config((ctx.obj or {}).get("config_file"))
    providers = _providers(config, only)
    found: list[DiscoveredTable] = []
    shares: list[tuple[str, ShareInfo]] = []
    unreachable: list[str] = []
    for provider in providers:
        try:
            discovered = discover_provider(config, provider, tables, workers=workers)
        except SharesyncError as exc:
            if len(providers) == 1:
                raise
            named = str(exc) if str(exc).startswith(f"provider '{provider}'") else f"provider '{provider}': {exc}"
            unreachable.append(named)  # the other providers are still listed
            continue
        found += discovered.tables
        shares += [(provider, share) for share in discovered.shares]
    if as_json:
        listed = [{"provider": p, **asdict(s)} for p, s in shares]
        click.echo(json.dumps({"tables": [asdict(t) for t in found], "shares": listed}, indent=2))
    elif as_config:
        from sharesync.sync.cli.discover_config import config_entries

        click.echo(config_entries(found), nl=False)
    else:
        from sharesync.sync.cli.discover_render import print_discovered

        print_discovered(found, shares, several=len(providers) > 1)
    failed = [t for t in found if t.error is not None]
    for t in failed:
        click.echo(f"error: {printable(t.name)}: {t.error}", err=True)
    for line in unreachable:
        click.echo(f"error: {printable(line)}", err=True)
    if failed or unreachable:
        sys.exit(EXIT_TABLE_FAILED)


def _providers(config: SharesyncConfig, only: str | None) -> list[str]:
    known = list(config.all_providers())
    if only is not None and only not in known:
        raise click.BadParameter(f"'{only}' is not a provider of the config (known: {', '.join(known)})")
    return [only] if only is not None else known


def discover_provider(
    config: SharesyncConfig, provider: str, names: Sequence[str] = (), *, workers: int = 8
) -> Discovered:
    """:func:`discover_tables` of one provider of the config, each row naming it (with that
    provider's client: its retry and rate settings, its name in retry notices); a refused
    credential names the provider and its profile file."""
    from sharesync.pipelines.run.clients import make_client

    try:
        with make_client(config, provider) as client:
            found = discover_tables(client, names, workers=workers)
    except SharesyncError as exc:
        raise credentials_refused(exc, provider, config.provider(provider).profile) from None
    return Discovered([replace(t, provider=provider) for t in found.tables], found.shares)
