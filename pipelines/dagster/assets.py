"""One Dagster asset per configured table: the user's Delta copy of a shared table.

Thin over the syncer (dagster-dlt style): :func:`build_sync_asset_specs` is pure and reads
only the config, so loading definitions never touches the network; the op body calls
:meth:`Syncer.sync_table` — the same code path as ``sharesync sync`` and ``sharesync
backfill`` — and turns its result into materialization metadata. Each table is its own
op, so tables sync in parallel, each in its own concurrency pool, each retried on its own.
"""

# No `from __future__ import annotations`: Dagster reads the op's `context` annotation as an object.

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.automation import table_condition
from sharesync.pipelines.dagster.freshness import freshness_bound, freshness_policy
from sharesync.pipelines.dagster.materialization import (
    health_metadata,
    materialization_metadata,
    target_uri,
    words_metadata,
)
from sharesync.pipelines.dagster.provider_facts import ProviderWords, provider_words
from sharesync.pipelines.dagster.retry_policy import describe, raise_for
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.pipelines.modes.registry import BUILTIN_MODES
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import TargetStats
from sharesync.pipelines.targets.health import Thresholds
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.redact import redact
from sharesync.sync.core.timestamps import given_timestamp
from sharesync.sync.protocol.commit_time import version_commit_time

if TYPE_CHECKING:  # the syncer's imports are paid at run time, not when definitions load
    from sharesync.pipelines.run.pass_resources import TableAccess
    from sharesync.pipelines.run.results import BackfillRequest, TableSyncResult

KINDS = {"deltasharing", "delta", "spark"}

# Transient failures (5xx, 429, dropped connections, a lease held by another process) get
# three more tries, 30 s → 60 s → 120 s apart (±jitter); permanent ones never retry.
DEFAULT_RETRY_POLICY = dg.RetryPolicy(
    max_retries=3, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


class SyncRunConfig(dg.Config):
    """Run config of one table's sync. Empty: sync incrementally. A timestamp: backfill.

    Same semantics as ``sharesync backfill NAME --from … [--to …] [--full-refresh]``.
    """

    starting_timestamp: str | None = Field(
        default=None,
        description="Backfill: replay changes committed at or after this time (ISO-8601, UTC if no offset).",
    )
    ending_timestamp: str | None = Field(
        default=None, description="Backfill: stop at the last version committed at or before this time."
    )
    full_refresh: bool = Field(
        default=False,
        description="Backfill: re-bootstrap from the snapshot at starting_timestamp instead of replaying.",
    )
    discard_target: bool = Field(
        default=False,
        description="Full refresh: also drop an append table's change log from before starting_timestamp.",
    )

    def backfill(self) -> "BackfillRequest | None":
        """The syncer's backfill request, or None for a normal incremental sync."""
        from sharesync.pipelines.run.results import BackfillRequest

        if self.starting_timestamp is None:
            if self.ending_timestamp is not None or self.full_refresh or self.discard_target:
                raise ConfigError(
                    "run config: ending_timestamp, full_refresh and discard_target need starting_timestamp "
                    "(the backfill's start)"
                )
            return None
        start = given_timestamp("run config: starting_timestamp", self.starting_timestamp)
        end = given_timestamp("run config: ending_timestamp", self.ending_timestamp) if self.ending_timestamp else None
        return BackfillRequest(start, end, self.full_refresh, self.discard_target)  # refuses an end before the start


def build_sync_asset_specs(config: SharesyncConfig, names: naming.Names = naming.DEFAULT_NAMES) -> list[dg.AssetSpec]:
    """The asset specs of every configured table; pure and offline."""
    return [_spec(config, table, names) for table in config.tables]


def _spec(config: SharesyncConfig, table: TableConfig, names: naming.Names) -> dg.AssetSpec:
    return dg.AssetSpec(
        key=names.asset_key(table),
        deps=[names.source_key(table)],
        description=describe_table(table),
        group_name=names.group_name(table),
        kinds=KINDS,
        code_version=naming.code_version(table),
        freshness_policy=freshness_policy(freshness_bound(config, table)),
        automation_condition=table_condition() if config.automation == "declarative" else None,
        metadata={
            "shared_table": table.name,
            "mode": table.mode.value,
            "keys": ", ".join(table.keys) if table.keys else "-",
            "dagster/uri": target_uri(table.target),
        },
    )


def describe_table(table: TableConfig) -> str:
    """What the asset is, from the table's config: specs are built when definitions load, which
    never touches the network. The provider's own words need it: each materialization records
    them (``provider_description``, ``share_*``), as of that run, and so do observations of the source."""
    how = BUILTIN_MODES.strategy(table).describe_table(table)
    parts = [f"Delta Sharing table `{table.name}`, kept in sync with the Delta table at `{table.target}` {how}."]
    if table.where:
        parts.append("Rows are filtered by the configured `where`.")
    if table.columns is not None:
        parts.append(f"Columns: {', '.join(table.columns)}.")
    parts.append("The provider's description is in the latest materialization's `provider_description`.")
    return " ".join(parts)


def build_table_assets(
    config: SharesyncConfig,
    *,
    retry_policy: dg.RetryPolicy = DEFAULT_RETRY_POLICY,
    names: naming.Names = naming.DEFAULT_NAMES,
) -> list[dg.AssetsDefinition]:
    """One op-backed asset per table (see the module docstring)."""
    specs = build_sync_asset_specs(config, names)
    return [
        _table_asset(table, spec, retry_policy, names.pool(table))
        for table, spec in zip(config.tables, specs, strict=True)
    ]


def _table_asset(table: TableConfig, spec: dg.AssetSpec, policy: dg.RetryPolicy, pool: str) -> dg.AssetsDefinition:
    name = table.key

    @dg.multi_asset(
        specs=[spec],
        name=naming.op_name(table),
        pool=pool,
        retry_policy=policy,
        op_tags={naming.TABLE_TAG: name},
    )
    def sync(
        context: dg.AssetExecutionContext, config: SyncRunConfig, sharesync: SharesyncResource
    ) -> dg.MaterializeResult:  # type: ignore[type-arg]
        return sync_table_asset(context, name, config, sharesync, policy)

    return sync


def sync_table_asset(
    context: dg.AssetExecutionContext,
    name: str,
    run_config: SyncRunConfig,
    sharesync: SharesyncResource,
    policy: dg.RetryPolicy | None,
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """Sync ``name`` and describe the result; failures become redacted Dagster failures."""
    try:
        backfill = run_config.backfill()
        with sharesync.syncer() as syncer:
            table = syncer.table(name)
            if backfill is not None:
                context.log.info(f"{name}: backfill from {backfill.starting_timestamp.isoformat()}")
            result = syncer.sync_table(table.key, backfill=backfill)
            access = syncer.resources
            commit_from, commit_to = _commit_range(access, table, result)
            stats = _target_stats(context, access, table)
            words = _provider_words(context, access, table)
            health = _target_health(context, access, table)
    except Exception as exc:  # noqa: BLE001 - every failure is translated, interrupts pass
        context.log.error(f"{name}: sync failed: {describe(exc)}")
        raise_for(exc, name, policy)
    metadata = materialization_metadata(
        result, target=table.target, stats=stats, commit_from=commit_from, commit_to=commit_to, now=datetime.now(UTC)
    )
    metadata |= words_metadata(words) if words is not None else {}
    metadata |= health
    context.log.info(_summary(result))
    for warning in result.warnings:
        context.log.warning(redact(f"{name}: {warning}"))
    version = result.checkpoint_version
    return dg.MaterializeResult(
        metadata=metadata, data_version=dg.DataVersion(str(version)) if version is not None else None
    )


def _commit_range(
    access: "TableAccess", table: TableConfig, result: "TableSyncResult"
) -> tuple[datetime | None, datetime | None]:
    """Commit timestamps of the first and last version applied; asked of the provider when a
    bootstrap could not learn them from the files it read."""
    client = access.client_for(table.provider)
    end_version = result.batches[-1].end_version if result.batches else result.checkpoint_version
    commit_to = result.batches[-1].end_commit_timestamp if result.batches else result.checkpoint_timestamp
    if commit_to is None and end_version is not None:
        commit_to = version_commit_time(client, table.name, end_version)
    if not result.batches:
        return commit_to, commit_to
    first = result.batches[0]
    if first.start_version == end_version:
        return commit_to, commit_to
    commit_from = first.start_commit_timestamp or version_commit_time(client, table.name, first.start_version)
    return commit_from, commit_to


def _target_stats(context: dg.AssetExecutionContext, access: "TableAccess", table: TableConfig) -> TargetStats | None:
    try:
        return DELTA.stats(access.locate(table.target), soft_delete=table.soft_delete)
    except Exception as exc:  # noqa: BLE001 - the sync succeeded; missing stats must not fail it
        context.log.warning(f"{table.key}: cannot read the target's row count and schema: {describe(exc)}")
        return None


def _target_health(context: dg.AssetExecutionContext, access: "TableAccess", table: TableConfig) -> dict[str, object]:
    """The target's health as metadata, against the table's own thresholds (docs/maintenance.md)."""
    thresholds = Thresholds.of(access.config.maintenance(table))
    try:
        health = DELTA.health(access.locate(table.target), thresholds)
    except Exception as exc:  # noqa: BLE001 - the sync succeeded; its target's health is an extra
        context.log.warning(f"{table.key}: cannot read the target's health: {describe(exc)}")
        return {}
    return health_metadata(health, thresholds) if health is not None else {}


def _provider_words(
    context: dg.AssetExecutionContext, access: "TableAccess", table: TableConfig
) -> "ProviderWords | None":
    try:
        return provider_words(access.client_for(table.provider), table.name)
    except Exception as exc:  # noqa: BLE001 - the sync succeeded; the provider's words are extras
        context.log.warning(f"{table.key}: cannot read the provider's description: {describe(exc)}")
        return None


def _summary(result: "TableSyncResult") -> str:
    stats = result.stats
    if not result.batches:
        return f"{result.name}: up to date at version {result.checkpoint_version}"
    return (
        f"{result.name}: versions {result.batches[0].start_version}..{result.checkpoint_version} "
        f"({result.changes.describe()}; {stats.files_downloaded} files, {stats.bytes_downloaded} bytes) "
        f"in {result.seconds:.1f}s"
    )
