"""The metadata of a table's materialization: what a sync did, as numbers the Dagster UI can plot.

Pure: the syncer's :class:`~sharesync.pipelines.run.results.TableSyncResult`, the target's stats and
the commit timestamps go in, a metadata mapping comes out. Counts and durations are ints
and floats (Dagster plots numeric entries across materializations); timestamps are
timestamp entries; the target is ``dagster/uri`` and its shape ``dagster/row_count`` and
``dagster/column_schema``. Every text entry is redacted.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from sharesync.pipelines.targets.health import TargetHealth, Thresholds, compaction_reason
from sharesync.sync.core.redact import redact

if TYPE_CHECKING:
    from sharesync.pipelines.dagster.provider_facts import ProviderWords
    from sharesync.pipelines.run.results import TableSyncResult
    from sharesync.pipelines.targets.facts import TargetStats

# The keys, in one place for tests and dashboards.
OUTCOME = "outcome"
VERSION_FROM = "source_version_from"
VERSION_TO = "source_version_to"
COMMIT_FROM = "source_commit_from"
COMMIT_TO = "source_commit_to"
SOURCE_VERSION = "source_version"
CHECKPOINT_VERSION = "checkpoint_version"
BATCHES = "batches"
DURATION = "duration_seconds"
LAG = "lag_seconds"
# The provider's words (one line each, bounded: sharesync.sync.core.provider_text).
PROVIDER_DESCRIPTION = "provider_description"
SHARE_DISPLAY_NAME = "share_display_name"
SHARE_COMMENT = "share_comment"
SHARE_PROPERTIES = "share_properties"
# Dagster's own keys (docs: "Asset metadata" → standard keys): the UI and lineage know them.
URI = "dagster/uri"
ROW_COUNT = "dagster/row_count"
COLUMN_SCHEMA = "dagster/column_schema"
TRANSFER_KEYS = ("files_downloaded", "bytes_downloaded", "url_refreshes")
# What the sync did to the target, in its mode's terms (TargetChanges.counts): merge mode's keys
# here; append mode has change_rows_appended and appended_<change type>, snapshot rows_written.
STAT_KEYS = ("rows_inserted", "rows_updated", "rows_deleted", *TRANSFER_KEYS)


def target_uri(target: str) -> str:
    """The target as a URI: object-store URIs as they are, local paths as ``file://``."""
    if "://" in target:
        return redact(target)
    return Path(target).resolve().as_uri()


def materialization_metadata(
    result: TableSyncResult,
    *,
    target: str,
    stats: TargetStats | None,
    commit_from: datetime | None,
    commit_to: datetime | None,
    now: datetime,
) -> dict[str, Any]:
    """Metadata for one table's materialization (see the module docstring for the conventions)."""
    if result.batches:
        version_from: int | None = result.batches[0].start_version
        version_to: int | None = result.batches[-1].end_version
    else:  # up to date: the range is the checkpoint itself
        version_from = version_to = result.checkpoint_version
    metadata: dict[str, Any] = {
        OUTCOME: result.outcome.value,
        BATCHES: len(result.batches),
        DURATION: dg.MetadataValue.float(round(result.seconds, 3)),
        URI: target_uri(target),
    }
    _put_int(metadata, VERSION_FROM, version_from)
    _put_int(metadata, VERSION_TO, version_to)
    _put_int(metadata, SOURCE_VERSION, result.source_version)
    _put_int(metadata, CHECKPOINT_VERSION, result.checkpoint_version)
    if commit_from is not None:
        metadata[COMMIT_FROM] = dg.MetadataValue.timestamp(commit_from)
    if commit_to is not None:
        metadata[COMMIT_TO] = dg.MetadataValue.timestamp(commit_to)
        metadata[LAG] = dg.MetadataValue.float(round(max(0.0, (now - commit_to).total_seconds()), 3))
    totals = result.stats
    for key, count in (result.changes.counts() | {k: int(getattr(totals, k)) for k in TRANSFER_KEYS}).items():
        metadata[key] = dg.MetadataValue.int(count)
    if result.warnings:
        metadata["warnings"] = dg.MetadataValue.text(redact("\n".join(result.warnings)))
    if result.compaction:
        metadata["target_compaction"] = dg.MetadataValue.text(result.compaction)
    if stats is not None:
        metadata[ROW_COUNT] = dg.MetadataValue.int(stats.rows)
        metadata[COLUMN_SCHEMA] = dg.MetadataValue.table_schema(column_schema(stats))
        metadata["target_delta_version"] = dg.MetadataValue.int(stats.version)
    return metadata


def health_metadata(health: TargetHealth, thresholds: Thresholds) -> dict[str, Any]:
    """The target's health from its log (docs/maintenance.md): what ``sharesync optimize`` would act on."""
    metadata: dict[str, Any] = {
        "target_files": dg.MetadataValue.int(health.files),
        "target_small_files": dg.MetadataValue.int(health.small_files),
        "target_bytes": dg.MetadataValue.int(health.bytes),
        "target_rows_deleted_by_deletion_vectors": dg.MetadataValue.int(health.deleted_rows),
        "target_deletion_vector_ratio": dg.MetadataValue.float(round(health.deleted_ratio, 4)),
        "target_compaction_due": dg.MetadataValue.text(compaction_reason(health, thresholds) or "no"),
    }
    if health.last_compaction is not None:
        metadata["target_last_compaction"] = dg.MetadataValue.timestamp(health.last_compaction)
    return metadata


def words_metadata(words: ProviderWords) -> dict[str, Any]:
    """What the provider says of the table and its share, as text entries (absent when it says nothing)."""
    share = words.share
    said = {
        PROVIDER_DESCRIPTION: words.description,
        SHARE_DISPLAY_NAME: share.display_name,
        SHARE_COMMENT: share.comment,
        SHARE_PROPERTIES: ", ".join(f"{k}={v}" for k, v in share.properties.items()) or None,
    }
    return {key: dg.MetadataValue.text(value) for key, value in said.items() if value}


def column_schema(stats: TargetStats) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name, type_name, constraints=dg.TableColumnConstraints(nullable=nullable))
            for name, type_name, nullable in stats.columns
        ]
    )


def _put_int(metadata: dict[str, Any], key: str, value: int | None) -> None:
    if value is not None:
        metadata[key] = dg.MetadataValue.int(value)
