"""The provider's shared tables as observable source assets: their data version is the table version.

Each table asset depends on its source, so the UI shows when the provider moved ahead of
the copy. The source is observed by one op for all tables (versions polled concurrently)
and by the ``sharesync_source_versions`` sensor, which records the same observation
(:func:`observation`) whenever a version changes.
"""

# No `from __future__ import annotations`: Dagster reads the op's `context` annotation as an object.

import warnings
from collections.abc import Iterator

import dagster as dg

from pipelines import naming
from pipelines.failures import describe
from pipelines.resources import SharesyncResource
from sync.config import SharesyncConfig, TableConfig
from sync.errors import SharesyncError

DATA_VERSION_TAG = "dagster/data_version"  # what ObserveResult(data_version=…) records
OBSERVE_OP = "observe_shared_tables"


def build_source_specs(config: SharesyncConfig) -> list[dg.AssetSpec]:
    return [
        dg.AssetSpec(
            key=naming.source_key(table),
            description=f"The provider's Delta Sharing table `{table.name}`; its data version is the table version.",
            group_name=naming.group_name(table),
            kinds={"deltasharing"},
            metadata={"shared_table": table.name},
        )
        for table in config.tables
    ]


def observation_metadata(version: int) -> dict[str, dg.MetadataValue]:  # type: ignore[type-arg]
    return {"table_version": dg.MetadataValue.int(version)}


def observation(table: TableConfig, version: int) -> dg.AssetObservation:
    """The event the sensor records: the same data version and metadata as the observe op."""
    return dg.AssetObservation(
        asset_key=naming.source_key(table),
        metadata=observation_metadata(version),
        tags={DATA_VERSION_TAG: str(version)},
    )


def build_source_observer(config: SharesyncConfig) -> dg.AssetsDefinition | None:
    """One observe op for every shared table (None without tables)."""
    if not config.tables:
        return None
    tables = {naming.source_key(t): t.name for t in config.tables}
    with warnings.catch_warnings():
        # Beta, and chosen knowingly: it is the AssetSpec-based observable source (the
        # single-asset decorator builds the deprecated SourceAsset) and observes all at once.
        warnings.simplefilter("ignore", dg.BetaWarning)
        decorate = dg.multi_observable_source_asset(
            specs=build_source_specs(config), can_subset=True, name=OBSERVE_OP
        )

    @decorate
    def observe(context: dg.AssetExecutionContext, sharesync: SharesyncResource) -> Iterator[dg.ObserveResult]:
        keys = [k for k in tables if k in context.selected_asset_keys]
        with sharesync.engine() as engine:
            versions = engine.source_versions([tables[k] for k in keys])
        failed = []
        for key in keys:
            polled = versions[tables[key]]
            if isinstance(polled, SharesyncError):
                failed.append(f"{tables[key]}: {describe(polled)}")
                continue
            yield dg.ObserveResult(
                asset_key=key, data_version=dg.DataVersion(str(polled)), metadata=observation_metadata(polled)
            )
        if failed:
            raise dg.Failure(description="cannot read the provider's version of " + "; ".join(failed))

    return observe
