"""In-process materializations against the local sharing server: correct targets, useful metadata."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable
from support.dagster_site import (
    APPEND_TABLE,
    MERGE_TABLE,
    Site,
    check_results,
    materialization,
    materialize,
)
from support.engines import on_both_engines
from support.schema_changes import add_column, drop_column
from support.verify import assert_append_target_matches, assert_merge_target_matches

from sharesync.pipelines.dagster.materialization import STAT_KEYS
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import open_store
from sharesync.sync.core.timestamps import from_millis

pytestmark = pytest.mark.slow


@on_both_engines  # the asset's metadata and checks as on Sail, on Apache Spark + Delta too
def test_first_materialization_bootstraps_both_tables_with_metadata(site: Site, engine_spark: dict[str, Any]) -> None:
    if engine_spark:
        site.write_config(site.merge_spec(), site.append_spec(), spark=engine_spark)
    defs = site.definitions()
    merge_key, append_key = site.key(MERGE_TABLE), site.key(APPEND_TABLE)
    before = datetime.now(UTC)

    result = materialize(defs, dg.AssetSelection.assets(merge_key, append_key))

    assert result.success
    version = site.source_version(MERGE_TABLE)
    assert_merge_target_matches(site.source_path(MERGE_TABLE), site.target(MERGE_TABLE), ["id"], version)
    append_version = site.source_version(APPEND_TABLE)
    assert_append_target_matches(
        site.source_path(APPEND_TABLE),
        site.target(APPEND_TABLE),
        bootstrap_version=append_version,
        end_version=append_version,
    )

    meta = materialization(result, merge_key)
    assert meta["outcome"] == "synced"
    assert meta["_data_version"] == str(version)
    assert (meta["source_version_from"], meta["source_version_to"]) == (version, version)
    assert meta["checkpoint_version"] == meta["source_version"] == version
    for key in (*STAT_KEYS, "batches", "dagster/row_count"):
        assert isinstance(meta[key], int), key
    for key in ("duration_seconds", "lag_seconds"):
        assert isinstance(meta[key], float), key
    commit = from_millis(site.commit_millis(MERGE_TABLE, version))
    assert meta["source_commit_to"] == pytest.approx(commit.timestamp())
    assert meta["lag_seconds"] >= (before - commit).total_seconds() - 1
    assert meta["rows_inserted"] == meta["dagster/row_count"] == len(_rows(site.target(MERGE_TABLE)))
    assert meta["files_downloaded"] > 0 and meta["bytes_downloaded"] > 0
    assert meta["dagster/uri"] == f"file://{site.target(MERGE_TABLE)}"
    columns = [c.name for c in meta["dagster/column_schema"].columns]
    assert columns[:2] == ["id", "region"] and "_sharesync_version" in columns

    appended = materialization(result, append_key)
    assert appended["outcome"] == "synced"
    # Append mode counts change rows appended, by type (a bootstrap appends the snapshot as inserts).
    assert appended["change_rows_appended"] == appended["appended_insert"] == appended["dagster/row_count"] > 0
    assert "rows_inserted" not in appended
    checks = check_results(result)
    assert checks[("sharesync/dg/sales/orders", "row_count_matches_source")].passed
    assert checks[("sharesync/dg/sales/events", "row_count_matches_source")].passed  # skipped: append mode


def test_incremental_materialization_applies_only_new_versions(site: Site) -> None:
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    selection = dg.AssetSelection.assets(key).without_checks()
    provider = DeltaTable(str(site.source_path(MERGE_TABLE)))
    provider.alter.set_table_description("Orders, v1")  # the provider's words (issue 43 §2) …
    (site.source_path(MERGE_TABLE).parents[1] / "_share.json").write_text('{"displayName": "Dagster Sales"}')
    first = site.source_version(MERGE_TABLE)
    before = materialization(materialize(defs, selection), key)
    site.commit(MERGE_TABLE, 3, seed=21)
    DeltaTable(str(site.source_path(MERGE_TABLE))).alter.set_table_description("Orders, v2")  # … changed
    latest = site.source_version(MERGE_TABLE)

    meta = materialization(materialize(defs, selection), key)

    assert (before["provider_description"], meta["provider_description"]) == ("Orders, v1", "Orders, v2")
    # The target's health from its log (docs/maintenance.md): a fresh bootstrap needs no compaction.
    assert before["target_files"] >= 1 and before["target_bytes"] > 0
    assert before["target_rows_deleted_by_deletion_vectors"] == 0 and before["target_deletion_vector_ratio"] == 0
    assert before["target_compaction_due"] == "no" and "target_last_compaction" not in before
    assert meta["target_files"] >= 1 and (
        meta["target_compaction_due"] == "no" or "threshold" in meta["target_compaction_due"]
    )
    assert meta["share_display_name"] == "Dagster Sales" and "share_comment" not in meta
    assert (meta["source_version_from"], meta["source_version_to"]) == (first + 1, latest)
    assert meta["source_commit_from"] <= meta["source_commit_to"]
    assert_merge_target_matches(site.source_path(MERGE_TABLE), site.target(MERGE_TABLE), ["id"], latest)

    again = materialization(materialize(defs, selection), key)
    assert again["outcome"] == "up_to_date"
    assert again["rows_inserted"] == again["files_downloaded"] == 0
    assert again["_data_version"] == str(latest)
    assert "warnings" not in again

    shutil.rmtree(site.target(MERGE_TABLE))  # lost: the next materialization rebuilds it, and says so
    healed = materialization(materialize(defs, selection), key)
    assert "was lost; rebuilt from the provider's snapshot at version" in healed["warnings"]
    assert_merge_target_matches(site.source_path(MERGE_TABLE), site.target(MERGE_TABLE), ["id"], latest)


def test_schema_policies_warn_in_the_materialization_metadata(site: Site) -> None:
    site.write_config(site.merge_spec(on_new_column="ignore", on_breaking_change="rebuild"))
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    selection = dg.AssetSelection.assets(key).without_checks()
    materialize(defs, selection)
    path, target = site.source_path(MERGE_TABLE), site.target(MERGE_TABLE)

    add_column(str(path), seed=3)  # a new provider column: left out, said once
    ignored = materialization(materialize(defs, selection), key)
    assert "on_new_column is 'ignore': the provider's new column(s) ['note']" in ignored["warnings"]
    drop_column(str(path))  # a breaking change: rebuilt, with the new schema
    rebuilt = materialization(materialize(defs, selection), key)

    assert "column 'qty' is missing from the new data" in rebuilt["warnings"]
    assert "on_breaking_change is 'rebuild'" in rebuilt["warnings"]
    assert "on_new_column" not in rebuilt["warnings"]
    latest = site.source_version(MERGE_TABLE)
    names = [n for n in DeltaTable(str(path)).schema().to_arrow().names if n != "note"]
    assert_merge_target_matches(path, target, ["id"], latest, columns=names)


def test_backfill_from_a_timestamp_replays_from_that_version(site: Site) -> None:
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    selection = dg.AssetSelection.assets(key).without_checks()
    materialize(defs, selection)
    latest = site.source_version(MERGE_TABLE)
    replay_from = 2
    start = from_millis(site.commit_millis(MERGE_TABLE, replay_from)).isoformat()

    result = materialize(
        defs, selection, run_config={"ops": {site.op(MERGE_TABLE): {"config": {"starting_timestamp": start}}}}
    )

    meta = materialization(result, key)
    assert (meta["source_version_from"], meta["source_version_to"]) == (replay_from, latest)
    assert_merge_target_matches(site.source_path(MERGE_TABLE), site.target(MERGE_TABLE), ["id"], latest)
    checkpoint = open_store(site.config().state_store).get_checkpoint(site.table_config(MERGE_TABLE).name)
    assert checkpoint is not None and checkpoint.version == latest


def test_backfill_config_without_a_start_fails_at_once(site: Site, instance: dg.DagsterInstance) -> None:
    defs = site.definitions()
    config = {"ops": {site.op(MERGE_TABLE): {"config": {"full_refresh": True}}}}

    result = materialize(
        defs,
        dg.AssetSelection.assets(site.key(MERGE_TABLE)).without_checks(),
        run_config=config,
        instance=instance,
        raise_on_error=False,
    )

    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "need starting_timestamp" in failures[0].step_failure_data.error.message  # type: ignore[union-attr]
    assert not [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY]


def _rows(target: str) -> list[dict[str, object]]:
    from deltalake import DeltaTable

    return read_rows(DeltaTable(target)).to_pylist()
