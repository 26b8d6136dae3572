"""Two checks on the target itself: no key twice among current rows, and the same schema as the provider.

* ``keys_unique`` (merge and history mode; blocking): a key that appears twice among the
  current rows means the copy is corrupt — a writer other than sharesync, or a bug — and
  whatever reads it downstream would double-count. It reads the key columns only (Parquet
  column projection through ``deltalake``; history mode adds its ``_sharesync_is_current``
  flag), no other data and no engine.
* ``schema_matches_source`` (warns): the provider's current schema (one ``/metadata`` call)
  against the target's (its Delta log): a column the provider added that the target lacks, a
  type that differs (widened), a column only the target has. sharesync's own columns and,
  with ``columns`` or ``on_new_column: ignore``, the columns left out on purpose are not
  differences. A new column is expected briefly after the provider adds it, until the next sync
  adds it too; a changed type warns before the sync that will stop on it (or rebuild).
* ``target_matches_snapshot`` (only with ``verify_check: true``; warns; never in the runs the
  sensor or automation start): ``sharesync verify --full`` — the target's keys and rows against
  the provider's snapshot at the checkpoint version. It downloads that snapshot's key columns,
  so it runs when asked for (the UI's "Execute checks", or a schedule of your own).

Facts are gathered here (I/O); the verdicts are pure functions of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from sharesync.pipelines.jobs.columns import spelled
from sharesync.pipelines.modes.registry import BUILTIN_MODES
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.sync.core.changefeed import CHANGE_COLUMNS
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.core.table_config import BreakingChangePolicy, NewColumnPolicy

if TYPE_CHECKING:
    from sharesync.pipelines.run.pass_resources import TableAccess

KEYS_UNIQUE = "keys_unique"
SCHEMA_DRIFT = "schema_matches_source"
FULL_VERIFY = "target_matches_snapshot"
IS_CURRENT = "_sharesync_is_current"  # history mode's current-row flag (sharesync.sync.core.history_columns)
OWN_PREFIX = "_sharesync_"
SAMPLE = 5  # duplicate keys named in the check's description

Column = tuple[str, str]  # (name, Delta type name)


def keyed(table: TableConfig) -> bool:
    """Modes whose target holds one current row per key."""
    return BUILTIN_MODES.strategy(table).keyed


# ---------------------------------------------------------------- key uniqueness


def duplicate_keys(target: Location, keys: Sequence[str], *, current_only: bool) -> tuple[int, list[str]] | None:
    """How many keys appear more than once (and a few of them); None when there is no target."""
    import pyarrow.compute as pc

    found = DELTA.identity(target)
    if found is None:
        return None
    keys = spelled(found.columns, keys)
    rows = DELTA.rows(target, [*keys, *([IS_CURRENT] if current_only else [])])
    if rows is None:
        return None
    if current_only:
        rows = rows.filter(pc.fill_null(rows.column(IS_CURRENT), False)).select(keys)
    counts = rows.group_by(keys).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts["count_all"], 1))
    sample = [", ".join(str(row[k]) for k in keys) for row in repeated.slice(0, SAMPLE).to_pylist()]
    return repeated.num_rows, sample


def keys_unique_check(access: TableAccess, table: TableConfig) -> dg.AssetCheckResult:
    current_only = access.modes.strategy(table).current_flag is not None
    found = duplicate_keys(access.locate(table.target), table.keys, current_only=current_only)
    return keys_unique_verdict(table.keys, found)


def keys_unique_verdict(keys: Sequence[str], found: tuple[int, list[str]] | None) -> dg.AssetCheckResult:
    if found is None:
        return dg.AssetCheckResult(check_name=KEYS_UNIQUE, passed=True, description="skipped: no target yet")
    repeated, sample = found
    metadata: dict[str, dg.RawMetadataValue] = {"duplicate_keys": repeated, "keys": ", ".join(keys)}
    if not repeated:
        return dg.AssetCheckResult(
            check_name=KEYS_UNIQUE, passed=True, metadata=metadata, description=f"every ({', '.join(keys)}) is unique"
        )
    shown = "; ".join(f"({s})" for s in sample) + (" …" if repeated > len(sample) else "")
    return dg.AssetCheckResult(
        check_name=KEYS_UNIQUE,
        passed=False,
        metadata=metadata,
        description=f"{repeated} key(s) appear more than once among current rows, e.g. {shown}; "
        "the target was changed outside sharesync: 'sharesync backfill NAME --full-refresh' rebuilds it",
    )


# ---------------------------------------------------------------- schema drift


def schema_check(access: TableAccess, table: TableConfig) -> dg.AssetCheckResult:
    answer = access.client_for(table.provider).metadata(table.name)
    provider = [(f.name, f.type_name) for f in answer.metadata.table_schema.fields]
    stats = DELTA.stats(access.locate(table.target))
    target = None if stats is None else [(name, type_name) for name, type_name, _ in stats.columns]
    wanted = None if table.columns is None else [*table.keys, *table.columns]
    return schema_verdict(
        answer.version, provider, target, wanted, policy=(table.on_new_column, table.on_breaking_change)
    )


def schema_verdict(
    source_version: int,
    provider: Sequence[Column],
    target: Sequence[Column] | None,
    wanted: Sequence[str] | None,
    *,
    policy: tuple[NewColumnPolicy, BreakingChangePolicy] = (NewColumnPolicy.ADD, BreakingChangePolicy.FAIL),
) -> dg.AssetCheckResult:
    """Differences between the provider's columns (those ``wanted``, all by default) and the target's data
    columns; ``policy`` (``on_new_column``, ``on_breaking_change``) says what the next sync makes of them —
    with ``ignore``, new provider columns are left out on purpose, like those ``columns`` leaves out."""
    if target is None:
        return dg.AssetCheckResult(check_name=SCHEMA_DRIFT, passed=True, description="skipped: no target yet")
    chosen = None if wanted is None else {w.lower() for w in wanted}
    source = {n.lower(): (n, t) for n, t in provider if chosen is None or n.lower() in chosen}
    mine = {n.lower(): (n, t) for n, t in target if not n.startswith(OWN_PREFIX) and n not in CHANGE_COLUMNS}
    missing = [f"{n} {t}" for k, (n, t) in source.items() if k not in mine]
    ignored, missing = (missing, []) if policy[0] is NewColumnPolicy.IGNORE else ([], missing)
    changed = [f"{n} {mine[k][1]} -> {t}" for k, (n, t) in source.items() if k in mine and mine[k][1] != t]
    extra = [f"{n} {t}" for k, (n, t) in mine.items() if k not in source]
    metadata: dict[str, dg.RawMetadataValue] = {
        "source_version": source_version,
        "not_in_target": ", ".join(missing) or "-",
        "type_changed": ", ".join(changed) or "-",
        "only_in_target": ", ".join(extra) or "-",
        **({"ignored": ", ".join(ignored)} if ignored else {}),
    }
    parts = [
        f"{label}: {', '.join(items)}"
        for label, items in (("new at the provider", missing), ("type changed", changed), ("only in the target", extra))
        if items
    ]
    if not parts:
        return dg.AssetCheckResult(
            check_name=SCHEMA_DRIFT,
            passed=True,
            metadata=metadata,
            description=f"the target's {len(mine)} columns match the provider's at version {source_version}",
        )
    return dg.AssetCheckResult(
        check_name=SCHEMA_DRIFT,
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=f"schema differs from the provider's at version {source_version} — "
        + "; ".join(parts)
        + f" (the next sync {_NEXT_SYNC[policy[0]]}; {_BREAKING[policy[1]]})",
    )


_NEXT_SYNC = {
    NewColumnPolicy.ADD: "adds new columns",
    NewColumnPolicy.IGNORE: "leaves new columns out",
    NewColumnPolicy.FAIL: "stops on new columns (on_new_column: fail)",
}
_BREAKING = {
    BreakingChangePolicy.FAIL: "a changed type stops it until 'sharesync reset NAME'",
    BreakingChangePolicy.REBUILD: "a changed type makes it rebuild the target (on_breaking_change: rebuild)",
}


# ---------------------------------------------------------------- full verification (optional)


def full_verify_check(access: TableAccess, table: TableConfig) -> dg.AssetCheckResult:
    """``sharesync verify NAME --full``: identity, then keys and rows against the checkpoint's snapshot."""
    from sharesync.pipelines.commands.verification import verify_table

    found = verify_table(access, table, full=True)
    metadata: dict[str, dg.RawMetadataValue] = {"identity": found.identity}
    if found.checkpoint_version is not None:
        metadata["checkpoint_version"] = found.checkpoint_version
    if found.comparison is not None:
        compared = found.comparison
        metadata |= {
            "source_rows": compared.source_rows,
            "target_rows": compared.target_rows,
            "missing_keys": compared.missing_keys,
            "extra_keys": compared.extra_keys,
        }
    return dg.AssetCheckResult(
        check_name=FULL_VERIFY,
        passed=found.ok,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description="; ".join(found.lines()),
    )
