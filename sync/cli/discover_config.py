"""``sharesync discover --config``: what the profiles reach as ``sharesync.yaml`` entries, ready to paste.

Pure: discovered tables in, YAML text out. Each table gets an explicit ``tables:`` entry and each
share one ``include:`` pattern that follows it as the provider adds and removes tables; paste
either (an explicit entry wins over a pattern for its table). Delta Sharing does not say which
columns are keys, so the modes offered need none: ``append`` where change data feed is on,
else ``snapshot``; switch a table to ``merge`` by adding its ``keys``.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from sharesync.sync.cli.discovered import DiscoveredTable
from sharesync.sync.core.providers import DEFAULT_PROVIDER

TEMPLATE = "./warehouse/{provider}/{share}/{schema}/{table}"


def config_entries(found: Sequence[DiscoveredTable]) -> str:
    """``tables:`` and ``include:`` entries for the tables that could be described."""
    readable = [t for t in found if t.error is None]
    tables = [_explicit(t) for t in readable]
    shares: dict[tuple[str, str], list[DiscoveredTable]] = {}
    for t in readable:
        shares.setdefault((t.provider, t.name.split(".")[0]), []).append(t)
    include = [_pattern(provider, share, members) for (provider, share), members in shares.items()]
    head = (
        "# sharesync discover --config: paste what you want into sharesync.yaml (the providers: and\n"
        "# profile: it names stay yours). Every table by name, each in a mode that needs no keys ...\n"
    )
    middle = "# ... or every table of each share, followed as the provider adds and removes tables:\n"
    return head + _dump({"tables": tables}) + middle + _dump({"include": include})


def _explicit(table: DiscoveredTable) -> dict[str, object]:
    share, schema, name = table.name.split(".")
    entry: dict[str, object] = {"name": table.name}
    if table.provider != DEFAULT_PROVIDER:
        entry["provider"] = table.provider
    entry["target"] = TEMPLATE.format(provider=table.provider, share=share, schema=schema, table=name)
    entry["mode"] = "append" if table.cdf_enabled else "snapshot"
    return entry


def _pattern(provider: str, share: str, members: Sequence[DiscoveredTable]) -> dict[str, object]:
    entry: dict[str, object] = {"pattern": f"{share}.*.*"}
    if provider != DEFAULT_PROVIDER:
        entry["provider"] = provider
    entry["target"] = TEMPLATE
    entry["mode"] = "append" if all(t.cdf_enabled for t in members) else "snapshot"
    return entry


def _dump(section: dict[str, object]) -> str:
    return str(yaml.safe_dump(section, sort_keys=False, default_flow_style=False))
