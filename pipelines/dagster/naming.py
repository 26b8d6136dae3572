"""Names the Dagster layer derives from a table's config: asset keys, op names, pools, tags.

Pure and stable: the same config always gives the same names, so run history, run keys and
pool limits survive restarts. A table of a provider other than the default one (``profile:``)
has its provider's name in front: ``["sharesync", provider, share, schema, table]``, so two
providers' tables never collide, while a one-provider config keeps the keys it always had. Dagster restricts op and group names to ``[A-Za-z0-9_]``;
shared-table names are free text, so a name that had to be changed gets a short hash of
the original appended and two different tables can never collide.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.providers import DEFAULT_PROVIDER

ASSET_PREFIX = "sharesync"
SOURCE_PREFIX = "delta_sharing"
TABLE_TAG = "sharesync/table"
POOL_PREFIX = "sharesync/"

# The fields that change what lands in the target. Schedules, freshness bounds, batch
# sizes and download concurrency change when or how fast, not what: they stay out.
_DATA_FIELDS = ("name", "target", "keys", "mode", "where", "columns", "soft_delete", "start")
_INVALID = re.compile(r"[^A-Za-z0-9_]")
_KEY_PART = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True)
class Names:
    """How one code location names its tables' definitions: the defaults, or a component's overrides."""

    asset_prefix: tuple[str, ...] = (ASSET_PREFIX,)
    source_prefix: tuple[str, ...] = (SOURCE_PREFIX,)
    group: str | None = None  # one group for every table instead of one per share
    shared_pool: str | None = None  # one concurrency pool for every table instead of one per table

    def asset_key(self, table: TableConfig) -> dg.AssetKey:
        return dg.AssetKey([*self.asset_prefix, *_key_parts(table)])

    def source_key(self, table: TableConfig) -> dg.AssetKey:
        return dg.AssetKey([*self.source_prefix, *_key_parts(table)])

    def group_name(self, table: TableConfig) -> str:
        return self.group or group_name(table)

    def pool(self, table: TableConfig) -> str:
        return self.shared_pool or pool(table)


DEFAULT_NAMES = Names()


def asset_key(table: TableConfig) -> dg.AssetKey:
    """``["sharesync", share, schema, table]``: the user's copy."""
    return DEFAULT_NAMES.asset_key(table)


def source_key(table: TableConfig) -> dg.AssetKey:
    """``["delta_sharing", share, schema, table]``: the provider's shared table."""
    return DEFAULT_NAMES.source_key(table)


def _key_parts(table: TableConfig) -> list[str]:
    """The table's share, schema and table as asset key parts. Dagster names an asset's output
    after its key with only ``-`` (and ``.``) turned into ``_``: any other character outside
    ``[A-Za-z0-9_]`` would stop the whole code location from loading, so such a part is renamed
    (with a hash: stable and unique); the names that worked before keep their keys."""
    return [dagster_name(part, _KEY_PART) for part in (*_provider(table), table.share, table.schema_name, table.table)]


def _provider(table: TableConfig) -> tuple[str, ...]:
    """The provider's part of a name: none for the default provider (names from before ``providers:``)."""
    return () if table.provider == DEFAULT_PROVIDER else (table.provider,)


def _stem(table: TableConfig) -> str:
    return "__".join((*_provider(table), table.share, table.schema_name, table.table))


def dagster_name(text: str, invalid: re.Pattern[str] = _INVALID) -> str:
    """``text`` as a valid Dagster name; changed names get a hash suffix to stay unique."""
    cleaned = invalid.sub("_", text)
    if cleaned == text and cleaned:
        return cleaned
    return f"{cleaned}_{hashlib.sha256(text.encode()).hexdigest()[:6]}"


def op_name(table: TableConfig) -> str:
    """The sync op's name, also the key of its run config (``ops: {<name>: {config: …}}``)."""
    return dagster_name(f"sync_{_stem(table)}")


def checks_op_name(table: TableConfig) -> str:
    return dagster_name(f"check_{_stem(table)}")


def group_name(table: TableConfig) -> str:
    return dagster_name("__".join((*_provider(table), table.share)))


def pool(table: TableConfig) -> str:
    """One concurrency pool per table: with a limit of 1, at most one sync of it at a time."""
    return f"{POOL_PREFIX}{table.key}".replace(" ", "_")


def schedule_name(table: TableConfig) -> str:
    return dagster_name(f"sync_{_stem(table)}_schedule")


def code_version(table: TableConfig) -> str:
    """A hash of the table's data-shaping config: Dagster marks the asset changed when it moves."""
    fields = table.model_dump(mode="json", include=set(_DATA_FIELDS))
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_key(table: TableConfig, version: int) -> str:
    """``key@version``: a sensor requests each source version of a table once."""
    return f"{table.key}@{version}"


def rebuild_run_key(table: TableConfig, version: int, checkpoint_written: datetime | None) -> str:
    """``name@version/target@<hash>``: the key of a run that rebuilds a table whose config moved
    it to another target or mode at a version already synced.

    It must differ from :func:`run_key` (Dagster launches a run key once per sensor, and
    ``name@version`` was used by the sync the checkpoint came from), from the key of a move at
    that version to any other target or mode, and from an earlier move to the same target
    (A → B → A → B at one version): the hash covers the target, the mode and when the
    checkpoint was written, which every rebuild moves on.
    """
    written = checkpoint_written.isoformat() if checkpoint_written is not None else None
    moved_to = json.dumps([table.target, table.mode.value, written], separators=(",", ":"))
    return f"{run_key(table, version)}/target@{hashlib.sha256(moved_to.encode()).hexdigest()[:8]}"
