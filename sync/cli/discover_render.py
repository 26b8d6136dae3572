"""``sharesync discover``'s table: one row per shared table, then what the provider says of each share.

The provider's words (a share's display name, comment and properties, a table's description)
arrive one line and bounded already (:mod:`sharesync.sync.core.provider_text`); here they are
escaped for rich, the description is shortened to its cell, and the share lines are printed in
full below the table, where a long comment stays readable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.sync.cli.discovered import DiscoveredTable
from sharesync.sync.cli.fit import Col, Kind, fitted_table
from sharesync.sync.cli.rendering import esc
from sharesync.sync.core.errors import printable

if TYPE_CHECKING:
    from sharesync.sync.protocol.responses import ShareInfo


def print_discovered(
    found: Sequence[DiscoveredTable], shares: Sequence[tuple[str, ShareInfo]], *, several: bool = False
) -> None:
    from rich.console import Console

    console = Console()
    if not found:
        console.print("No tables are shared with this profile.")
        return
    failed = sum(t.error is not None for t in found)
    title = f"{len(found)} shared table{'s' if len(found) != 1 else ''}" + (f", {failed} failed" if failed else "")
    cols = [
        *([Col("provider")] if several else []),
        Col("table"),
        Col("version", Kind.NUMBER),
        Col("CDF", Kind.WORD),
        Col("partition columns", Kind.LIST, optional=True),
        Col("reader features", Kind.LIST, optional=True),
        Col("description", Kind.LINE, optional=True),
    ]
    console.print(fitted_table(cols, [_row(t, several) for t in found], console.width, title=title))
    for provider, share in shares:
        said = share.describe()
        if said is not None:
            whose = f"{esc(provider)}: " if several else ""
            console.print(f"share {whose}{esc(share.name)}: {esc(said)}", highlight=False, soft_wrap=True)


def _row(t: DiscoveredTable, several: bool) -> list[str]:
    which = [esc(t.provider)] if several else []
    if t.error is not None:  # the error itself follows on stderr, in full
        return [*which, esc(printable(t.name)), "[red]failed[/red]", "—", "—", "—", "—"]
    partitions = ", ".join(t.partition_columns) or "—"
    return [
        *which,
        esc(printable(t.name)),
        str(t.version),
        "yes" if t.cdf_enabled else "no",
        esc(printable(partitions)),
        ", ".join(t.reader_features) or "—",
        esc(t.description) if t.description else "—",
    ]
