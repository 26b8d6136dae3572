"""Asset checks of each table: the copy is complete, unique, shaped like the source, fresh, and reachable.

* ``row_count_matches_source``: the target's live rows equal the source's ``numRecords`` at
  the checkpoint version (summed from the file stats of a snapshot query). Skipped — passed,
  saying so — where the two are not comparable: append mode (a change log), a ``where``
  filter, or a provider that sends no stats.
* ``keys_unique`` (merge and history mode; blocking) and ``schema_matches_source``:
  :mod:`~sharesync.pipelines.dagster.target_checks`.
* ``freshness`` (only when ``freshness_minutes`` is configured): the oldest source commit
  not yet applied is younger than the bound (:mod:`~sharesync.pipelines.dagster.freshness`).
* ``profile_token_expiry``: warns when the profile's token expires within 7 days, fails
  when it has expired.
* ``target_healthy`` (warns): no compaction due (:mod:`~sharesync.pipelines.dagster.health_check`).

The verdicts are pure functions of the facts (tested with fixed clocks); the op gathers
the facts. A check that cannot gather them fails with a warning and the redacted reason.
All checks of a table share one op in the table's pool, so a check never reads a target
while a sync of it is half-way through.
"""

# No `from __future__ import annotations`: Dagster reads the op's `context` annotation as an object.

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import dagster as dg

from sharesync.pipelines.commands.status import TOKEN_WARNING_DAYS
from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.freshness import FRESHNESS, freshness_bound, freshness_check
from sharesync.pipelines.dagster.health_check import TARGET_HEALTHY, target_health_check
from sharesync.pipelines.dagster.provider_facts import snapshot_num_records
from sharesync.pipelines.dagster.retry_policy import describe
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.pipelines.dagster.target_checks import (
    FULL_VERIFY,
    KEYS_UNIQUE,
    SCHEMA_DRIFT,
    full_verify_check,
    keyed,
    keys_unique_check,
    schema_check,
)
from sharesync.pipelines.modes.base import ModeStrategy
from sharesync.pipelines.modes.registry import BUILTIN_MODES
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.core.location import Location

if TYPE_CHECKING:  # the syncer's imports are paid at run time, not when definitions load
    from sharesync.pipelines.run.pass_resources import TableAccess

ROW_COUNT = "row_count_matches_source"
TOKEN_EXPIRY = "profile_token_expiry"

WARN = dg.AssetCheckSeverity.WARN
ERROR = dg.AssetCheckSeverity.ERROR

Gather = Callable[["TableAccess", TableConfig], dg.AssetCheckResult]


def build_check_specs(
    config: SharesyncConfig, table: TableConfig, names: naming.Names = naming.DEFAULT_NAMES
) -> list[dg.AssetCheckSpec]:
    """Every check of ``table``: the routine ones and, when enabled, the full verification."""
    specs = _routine_specs(config, table, names)
    if config.verify_check and BUILTIN_MODES.strategy(table).copies_source:
        specs.append(
            dg.AssetCheckSpec(
                FULL_VERIFY,
                asset=names.asset_key(table),
                description="The target's keys and rows equal the provider's snapshot at the checkpoint (verify --full).",
            )
        )
    return specs


def routine_check_keys(
    config: SharesyncConfig, table: TableConfig, names: naming.Names = naming.DEFAULT_NAMES
) -> list[dg.AssetCheckKey]:
    """The checks a sync run includes: all but the full verification, which downloads a snapshot."""
    return [spec.key for spec in _routine_specs(config, table, names)]


def _routine_specs(config: SharesyncConfig, table: TableConfig, names: naming.Names) -> list[dg.AssetCheckSpec]:
    """With declarative automation, they run after each sync (a sensor's run request names them)."""
    key = names.asset_key(table)
    after_sync = dg.AutomationCondition.eager() if config.automation == "declarative" else None
    described = {
        ROW_COUNT: "The target's live rows equal the source's numRecords at the checkpoint.",
        SCHEMA_DRIFT: "The target's columns and types equal the provider's current schema.",
        TOKEN_EXPIRY: f"The profile's token is valid for {TOKEN_WARNING_DAYS}+ days.",
        TARGET_HEALTHY: "No compaction due: deletion vectors and small files under the maintenance thresholds.",
    }
    if keyed(table):
        described[KEYS_UNIQUE] = f"No ({', '.join(table.keys)}) appears twice among the current rows."
    bound = freshness_bound(config, table)
    if bound is not None:
        described[FRESHNESS] = f"No source commit older than {bound:g} minutes is missing."
    return [
        dg.AssetCheckSpec(
            name, asset=key, description=text, blocking=name == KEYS_UNIQUE, automation_condition=after_sync
        )
        for name, text in described.items()
    ]


def build_table_checks(
    config: SharesyncConfig, names: naming.Names = naming.DEFAULT_NAMES
) -> list[dg.AssetChecksDefinition]:
    return [_table_checks(config, table, names) for table in config.tables]


def _table_checks(config: SharesyncConfig, table: TableConfig, names: naming.Names) -> dg.AssetChecksDefinition:
    name = table.key

    @dg.multi_asset_check(
        specs=build_check_specs(config, table, names),
        can_subset=True,
        name=naming.checks_op_name(table),
        pool=names.pool(table),
    )
    def checks(context: dg.AssetCheckExecutionContext, sharesync: SharesyncResource) -> Iterator[dg.AssetCheckResult]:
        selected = {k.name for k in context.selected_asset_check_keys}
        gatherers: dict[str, Gather] = {
            ROW_COUNT: row_count_check,
            KEYS_UNIQUE: keys_unique_check,
            SCHEMA_DRIFT: schema_check,
            FRESHNESS: freshness_check,
            TOKEN_EXPIRY: token_expiry_check,
            TARGET_HEALTHY: target_health_check,
            FULL_VERIFY: full_verify_check,
        }
        with sharesync.syncer() as syncer:
            for check_name, gather in gatherers.items():
                if check_name not in selected:
                    continue
                try:
                    yield gather(syncer.resources, syncer.table(name))
                except Exception as exc:  # noqa: BLE001 - report, redacted, as a failed check
                    context.log.warning(f"{name}: {check_name} could not run: {describe(exc)}")
                    yield dg.AssetCheckResult(
                        check_name=check_name,
                        passed=False,
                        severity=WARN,
                        description=f"could not evaluate: {describe(exc)}",
                    )

    return checks


# ---------------------------------------------------------------- gathering facts (I/O)


def row_count_check(access: "TableAccess", table: TableConfig) -> dg.AssetCheckResult:
    strategy = access.modes.strategy(table)
    if not strategy.copies_source:
        return skipped(ROW_COUNT, f"{table.mode.value} mode keeps a {strategy.keeps}, not a copy of the source's rows")
    if table.where:
        return skipped(ROW_COUNT, "a 'where' filter keeps only some of the source's rows")
    checkpoint = access.store.get_checkpoint(table.key)
    if checkpoint is None:
        return dg.AssetCheckResult(check_name=ROW_COUNT, passed=False, severity=WARN, description="never synced")
    target_rows = _copy_rows(access.locate(table.target), table, strategy)
    client = access.client_for(table.provider)
    latest = client.table_version(table.name).version
    try:
        source_rows = snapshot_num_records(client, table.name, checkpoint.version, latest=latest == checkpoint.version)
    except SharesyncError as exc:  # e.g. the provider shares no history to query the checkpoint's version
        return skipped(ROW_COUNT, f"the provider cannot list version {checkpoint.version} (unknown): {describe(exc)}")
    return row_count_verdict(checkpoint.version, target_rows, source_rows)


def _copy_rows(target: Location, table: TableConfig, strategy: ModeStrategy) -> int | None:
    """The target's rows that stand for source rows: a history target's current rows only."""
    if strategy.current_flag is not None:
        from deltalake.exceptions import TableNotFoundError

        try:
            return DELTA.current_rows(target)
        except TableNotFoundError:
            return None
    stats = DELTA.stats(target, soft_delete=table.soft_delete)
    return None if stats is None else stats.rows


def token_expiry_check(access: "TableAccess", table: TableConfig, now: datetime | None = None) -> dg.AssetCheckResult:
    from sharesync.sync.protocol.profile import load_profile

    profile = load_profile(access.config.provider(table.provider).profile, allow_expired=True)
    return token_expiry_verdict(profile.expiration_time, now or datetime.now(UTC))


# ---------------------------------------------------------------- verdicts (pure)


def skipped(check_name: str, reason: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=check_name, passed=True, description=f"skipped: {reason}", metadata={"status": "skipped"}
    )


def row_count_verdict(checkpoint_version: int, target_rows: int | None, source_rows: int | None) -> dg.AssetCheckResult:
    if source_rows is None:
        return skipped(ROW_COUNT, f"the provider sends no numRecords stats for version {checkpoint_version} (unknown)")
    metadata: dict[str, dg.RawMetadataValue] = {
        "checkpoint_version": checkpoint_version,
        "source_rows": source_rows,
    }
    if target_rows is None:
        return dg.AssetCheckResult(
            check_name=ROW_COUNT,
            passed=False,
            metadata=metadata,
            description=f"the target is missing, yet the checkpoint is at version {checkpoint_version}",
        )
    metadata |= {"target_rows": target_rows, "difference": target_rows - source_rows}
    passed = target_rows == source_rows
    said = "equals" if passed else "differs from"
    return dg.AssetCheckResult(
        check_name=ROW_COUNT,
        passed=passed,
        metadata=metadata,
        description=f"target rows {target_rows} {said} the source's {source_rows} at version {checkpoint_version}",
    )


def token_expiry_verdict(expires_at: datetime | None, now: datetime) -> dg.AssetCheckResult:
    if expires_at is None:
        return dg.AssetCheckResult(check_name=TOKEN_EXPIRY, passed=True, description="the token does not expire")
    days = (expires_at - now).total_seconds() / 86400
    metadata: dict[str, dg.RawMetadataValue] = {
        "expires_at": dg.MetadataValue.timestamp(expires_at),
        "days_left": round(days, 2),
    }
    if days <= 0:
        return dg.AssetCheckResult(
            check_name=TOKEN_EXPIRY,
            passed=False,
            severity=ERROR,
            metadata=metadata,
            description=f"the token expired at {expires_at.isoformat()}; ask the provider for a new profile",
        )
    if days <= TOKEN_WARNING_DAYS:
        return dg.AssetCheckResult(
            check_name=TOKEN_EXPIRY,
            passed=False,
            severity=WARN,
            metadata=metadata,
            description=f"the token expires at {expires_at.isoformat()} (in {days:.1f} days); ask the provider for a new profile",
        )
    return dg.AssetCheckResult(
        check_name=TOKEN_EXPIRY, passed=True, metadata=metadata, description=f"valid for {days:.0f} more days"
    )
