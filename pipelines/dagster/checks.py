"""Asset checks of each table: the copy is complete, fresh, and its credentials will keep working.

* ``row_count_matches_source``: the target's live rows equal the source's ``numRecords`` at
  the checkpoint version (summed from the file stats of a snapshot query). Skipped — passed,
  saying so — where the two are not comparable: append mode (a change log), a ``where``
  filter, or a provider that sends no stats.
* ``freshness`` (only when ``freshness_minutes`` is configured): the oldest source commit
  not yet applied is younger than the bound; a copy at the provider's version has lag 0.
* ``profile_token_expiry``: warns when the profile's token expires within 7 days, fails
  when it has expired.

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

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.failures import describe
from sharesync.pipelines.dagster.provider_facts import commit_timestamp, snapshot_num_records
from sharesync.pipelines.dagster.resources import SharesyncResource
from sharesync.pipelines.jobs.target_stats import read_target_stats
from sharesync.pipelines.run.status import TOKEN_WARNING_DAYS
from sharesync.sync.core.config import Mode, SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError

if TYPE_CHECKING:  # the engine's imports are paid at run time, not when definitions load
    from sharesync.pipelines.run.engine import SyncEngine
    from sharesync.state import Checkpoint

ROW_COUNT = "row_count_matches_source"
FRESHNESS = "freshness"
TOKEN_EXPIRY = "profile_token_expiry"

WARN = dg.AssetCheckSeverity.WARN
ERROR = dg.AssetCheckSeverity.ERROR


def freshness_bound(config: SharesyncConfig, table: TableConfig) -> float | None:
    return table.freshness_minutes or config.defaults.freshness_minutes


def build_check_specs(config: SharesyncConfig, table: TableConfig) -> list[dg.AssetCheckSpec]:
    key = naming.asset_key(table)
    specs = [
        dg.AssetCheckSpec(
            ROW_COUNT, asset=key, description="The target's live rows equal the source's numRecords at the checkpoint."
        ),
        dg.AssetCheckSpec(TOKEN_EXPIRY, asset=key, description=f"The profile's token is valid for {TOKEN_WARNING_DAYS}+ days."),
    ]
    bound = freshness_bound(config, table)
    if bound is not None:
        specs.append(
            dg.AssetCheckSpec(
                FRESHNESS, asset=key, description=f"No source commit older than {bound:g} minutes is missing."
            )
        )
    return specs


def build_table_checks(config: SharesyncConfig) -> list[dg.AssetChecksDefinition]:
    return [_table_checks(config, table) for table in config.tables]


def _table_checks(config: SharesyncConfig, table: TableConfig) -> dg.AssetChecksDefinition:
    name = table.name

    @dg.multi_asset_check(
        specs=build_check_specs(config, table),
        can_subset=True,
        name=naming.checks_op_name(table),
        pool=naming.pool(table),
    )
    def checks(context: dg.AssetCheckExecutionContext, sharesync: SharesyncResource) -> Iterator[dg.AssetCheckResult]:
        selected = {k.name for k in context.selected_asset_check_keys}
        gatherers: dict[str, Callable[[SyncEngine, TableConfig], dg.AssetCheckResult]] = {
            ROW_COUNT: row_count_check,
            FRESHNESS: freshness_check,
            TOKEN_EXPIRY: token_expiry_check,
        }
        with sharesync.engine() as engine:
            for check_name, gather in gatherers.items():
                if check_name not in selected:
                    continue
                try:
                    yield gather(engine, engine.config.table(name))
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


def row_count_check(engine: "SyncEngine", table: TableConfig) -> dg.AssetCheckResult:
    if table.mode is Mode.APPEND:
        return skipped(ROW_COUNT, "append mode keeps a change log, not a copy of the source's rows")
    if table.where:
        return skipped(ROW_COUNT, "a 'where' filter keeps only some of the source's rows")
    checkpoint = engine.store.get_checkpoint(table.name)
    if checkpoint is None:
        return dg.AssetCheckResult(check_name=ROW_COUNT, passed=False, severity=WARN, description="never synced")
    target = read_target_stats(table.target, soft_delete=table.soft_delete)
    latest = engine.client.table_version(table.name).version
    try:
        source_rows = snapshot_num_records(
            engine.client, table.name, checkpoint.version, latest=latest == checkpoint.version
        )
    except SharesyncError as exc:  # e.g. the provider shares no history to query the checkpoint's version
        return skipped(ROW_COUNT, f"the provider cannot list version {checkpoint.version} (unknown): {describe(exc)}")
    return row_count_verdict(checkpoint.version, None if target is None else target.rows, source_rows)


def freshness_check(engine: "SyncEngine", table: TableConfig, now: datetime | None = None) -> dg.AssetCheckResult:
    bound = freshness_bound(engine.config, table)
    assert bound is not None, "the freshness check exists only with a bound"
    checkpoint = engine.store.get_checkpoint(table.name)
    source = engine.client.table_version(table.name).version
    oldest = None
    if checkpoint is not None and checkpoint.version < source:
        oldest = commit_timestamp(engine.client, table.name, checkpoint.version + 1)
    return freshness_verdict(bound, checkpoint, source, oldest, now or datetime.now(UTC))


def token_expiry_check(engine: "SyncEngine", table: TableConfig, now: datetime | None = None) -> dg.AssetCheckResult:
    from sharesync.sync.protocol.profile import load_profile

    profile = load_profile(engine.config.profile, allow_expired=True)
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
            check_name=ROW_COUNT, passed=False, metadata=metadata,
            description=f"the target is missing, yet the checkpoint is at version {checkpoint_version}",
        )
    metadata |= {"target_rows": target_rows, "difference": target_rows - source_rows}
    passed = target_rows == source_rows
    said = "equals" if passed else "differs from"
    return dg.AssetCheckResult(
        check_name=ROW_COUNT, passed=passed, metadata=metadata,
        description=f"target rows {target_rows} {said} the source's {source_rows} at version {checkpoint_version}",
    )


def freshness_verdict(
    bound_minutes: float,
    checkpoint: "Checkpoint | None",
    source_version: int,
    oldest_unapplied_commit: datetime | None,
    now: datetime,
) -> dg.AssetCheckResult:
    """Lag = age of the oldest source commit the target lacks (0 when at the provider's version).

    When that commit's time is unknown, the checkpoint's own commit time (or, failing that,
    the last sync) bounds it from above: the missing commit cannot be older.
    """
    bound = bound_minutes * 60
    metadata: dict[str, dg.RawMetadataValue] = {"bound_seconds": bound, "source_version": source_version}
    if checkpoint is None:
        return dg.AssetCheckResult(check_name=FRESHNESS, passed=False, metadata=metadata, description="never synced")
    metadata |= {"checkpoint_version": checkpoint.version, "versions_behind": max(0, source_version - checkpoint.version)}
    if checkpoint.version == source_version:
        metadata["lag_seconds"] = 0.0
        return dg.AssetCheckResult(
            check_name=FRESHNESS, passed=True, metadata=metadata, description="at the provider's version"
        )
    since = oldest_unapplied_commit or checkpoint.version_timestamp or checkpoint.updated_at
    if since is None:
        return dg.AssetCheckResult(
            check_name=FRESHNESS, passed=False, severity=WARN, metadata=metadata,
            description=f"behind (version {checkpoint.version} of {source_version}); commit times unknown",
        )
    lag = max(0.0, (now - since).total_seconds())
    metadata["lag_seconds"] = round(lag, 3)
    passed = lag <= bound
    return dg.AssetCheckResult(
        check_name=FRESHNESS, passed=passed, metadata=metadata,
        description=f"lag {lag / 60:.1f} min {'within' if passed else 'over'} the bound of {bound_minutes:g} min "
        f"(version {checkpoint.version} of {source_version})",
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
            check_name=TOKEN_EXPIRY, passed=False, severity=ERROR, metadata=metadata,
            description=f"the token expired at {expires_at.isoformat()}; ask the provider for a new profile",
        )
    if days <= TOKEN_WARNING_DAYS:
        return dg.AssetCheckResult(
            check_name=TOKEN_EXPIRY, passed=False, severity=WARN, metadata=metadata,
            description=f"the token expires at {expires_at.isoformat()} (in {days:.1f} days); ask the provider for a new profile",
        )
    return dg.AssetCheckResult(
        check_name=TOKEN_EXPIRY, passed=True, metadata=metadata, description=f"valid for {days:.0f} more days"
    )
