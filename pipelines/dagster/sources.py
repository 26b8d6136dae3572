"""The provider's shared tables as observable source assets: their data version is the table version.

Each table asset depends on its source, so the UI shows when the provider moved ahead of
the copy. Two things observe the sources: the ``sharesync_source_versions`` sensor, which
records the version (:func:`observation`) whenever it changes, and the observe op ("Observe
sources" in the UI), which also records the provider's description and schema.
"""

# No `from __future__ import annotations`: Dagster reads the op's `context` annotation as an object.

import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, cast

import dagster as dg

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.automation import source_condition
from sharesync.pipelines.dagster.retry_policy import describe
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.core.providers import credentials_refused

if TYPE_CHECKING:
    from sharesync.sync.protocol.client import TableMetadata

POLL_WORKERS = 16

DATA_VERSION_TAG = "dagster/data_version"  # what ObserveResult(data_version=…) records
OBSERVE_OP = "observe_shared_tables"


def build_source_specs(config: SharesyncConfig, names: naming.Names = naming.DEFAULT_NAMES) -> list[dg.AssetSpec]:
    """With declarative automation, each source is observed on ``observe_schedule``."""
    observe = source_condition(config.observe_schedule) if config.automation == "declarative" else None
    return [
        dg.AssetSpec(
            key=names.source_key(table),
            description=f"The provider's Delta Sharing table `{table.name}`; its data version is the table version.",
            group_name=names.group_name(table),
            kinds={"deltasharing"},
            metadata={"shared_table": table.name},
            automation_condition=observe,
        )
        for table in config.tables
    ]


def observation_metadata(version: int) -> dict[str, dg.MetadataValue]:
    return {"table_version": dg.MetadataValue.int(version)}


def described_observation_metadata(answer: "TableMetadata") -> dict[str, dg.MetadataValue]:
    """What the observe op adds from the table's metadata: description, schema, partitions, CDF."""
    metadata = answer.metadata
    entries = observation_metadata(answer.version)
    entries["change_data_feed"] = dg.MetadataValue.bool(metadata.cdf_enabled)
    entries["partition_columns"] = dg.MetadataValue.text(", ".join(metadata.partition_columns) or "-")
    entries["dagster/column_schema"] = dg.MetadataValue.table_schema(
        dg.TableSchema(
            columns=[
                dg.TableColumn(f.name, f.type_name, constraints=dg.TableColumnConstraints(nullable=f.nullable))
                for f in metadata.table_schema.fields
            ]
        )
    )
    if answer.description:  # the provider's words: one line, bounded, redacted (provider_text)
        entries["description"] = dg.MetadataValue.text(answer.description)
    if metadata.num_files is not None:
        entries["num_files"] = dg.MetadataValue.int(metadata.num_files)
    if metadata.size is not None:
        entries["size_bytes"] = dg.MetadataValue.int(metadata.size)
    return entries


def observation(table: TableConfig, version: int, names: naming.Names = naming.DEFAULT_NAMES) -> dg.AssetObservation:
    """The event the sensor records: the source's data version, from one ``/version`` call."""
    return dg.AssetObservation(
        asset_key=names.source_key(table),
        metadata=observation_metadata(version),
        tags={DATA_VERSION_TAG: str(version)},
    )


def build_source_observer(
    config: SharesyncConfig, names: naming.Names = naming.DEFAULT_NAMES
) -> dg.AssetsDefinition | None:
    """One observe op for every shared table (None without tables).

    Observing asks for each table's metadata (concurrently), so besides the version it records
    the provider's description, schema, partition columns and whether change data feed is on.
    """
    if not config.tables:
        return None
    tables = {names.source_key(t): t for t in config.tables}

    def observe(context: dg.AssetExecutionContext, sharesync: SharesyncResource) -> Iterator[dg.ObserveResult]:
        keys = [k for k in tables if k in context.selected_asset_keys]
        with sharesync.access() as access:

            def ask(key: dg.AssetKey) -> "TableMetadata | SharesyncError":
                provider = tables[key].provider
                try:  # a provider whose profile cannot be read fails its own tables' observations only
                    return access.client_for(provider).metadata(tables[key].name)
                except SharesyncError as exc:
                    return credentials_refused(exc, provider, access.config.provider(provider).profile)

            with ThreadPoolExecutor(max_workers=min(POLL_WORKERS, max(1, len(keys)))) as pool:
                answers = list(pool.map(ask, keys))
        failed = []
        for key, answer in zip(keys, answers, strict=True):
            if isinstance(answer, SharesyncError):
                failed.append(f"{tables[key].key}: {describe(answer)}")
                continue
            yield dg.ObserveResult(
                asset_key=key,
                data_version=dg.DataVersion(str(answer.version)),
                metadata=described_observation_metadata(answer),
            )
        if failed:
            raise dg.Failure(description="cannot read the provider's metadata of " + "; ".join(failed))

    with warnings.catch_warnings():
        # Beta, and chosen knowingly: it is the AssetSpec-based observable source (the
        # single-asset decorator builds the deprecated SourceAsset) and observes all at once.
        warnings.simplefilter("ignore", dg.BetaWarning)
        decorate = dg.multi_observable_source_asset(
            specs=build_source_specs(config, names), can_subset=True, name=OBSERVE_OP
        )
        return cast(dg.AssetsDefinition, decorate(observe))
