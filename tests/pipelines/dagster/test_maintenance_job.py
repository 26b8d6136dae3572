"""Target upkeep in Dagster: the ``target_healthy`` check, and the ``sharesync_maintenance`` job that fixes what it finds."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import dagster as dg
import pytest
from support.dagster_site import MERGE_TABLE, Site, check_results, materialize
from support.verify import assert_merge_target_matches

from sharesync.pipelines.dagster.health_check import TARGET_HEALTHY, health_verdict
from sharesync.pipelines.dagster.maintenance_job import MAINTENANCE_JOB
from sharesync.pipelines.targets.health import MIB, TargetHealth, Thresholds
from sharesync.sync.core.errors import ConfigError

HEALTHY = TargetHealth(
    version=3, files=2, bytes=64 * MIB, small_files=0, rows=1000, deleted_rows=0,
    files_with_deletion_vectors=0, last_compaction=datetime(2026, 12, 1, tzinfo=UTC),
)  # fmt: skip


def test_the_verdict_warns_naming_the_threshold_reached() -> None:
    assert health_verdict(None, Thresholds()).passed  # no target yet: nothing to judge
    healthy = health_verdict(HEALTHY, Thresholds())
    assert healthy.passed and healthy.description.startswith("2 files (0 small), 64.0 MiB, 1000 rows")  # type: ignore[union-attr]
    due = health_verdict(replace(HEALTHY, deleted_rows=200, files_with_deletion_vectors=1), Thresholds())
    assert not due.passed and due.severity is dg.AssetCheckSeverity.WARN
    assert due.description == (
        "compaction due: 20.0% of its rows are deleted by deletion vectors (threshold 10%) ('sharesync optimize')"
    )
    assert due.metadata["target_deletion_vector_ratio"].value == 0.2


def test_the_job_exists_always_and_is_scheduled_when_asked(site: Site) -> None:
    site.write_config(site.merge_spec())
    defs = site.definitions()
    assert defs.resolve_job_def(MAINTENANCE_JOB).name == MAINTENANCE_JOB
    assert not [s for s in defs.schedules or [] if s.name == f"{MAINTENANCE_JOB}_schedule"]  # type: ignore[union-attr]
    site.write_config(site.merge_spec(), maintenance_job={"schedule": "0 3 * * 0"})
    [schedule] = [s for s in site.definitions().schedules or [] if s.name == f"{MAINTENANCE_JOB}_schedule"]  # type: ignore[union-attr]
    assert schedule.cron_schedule == "0 3 * * 0" and schedule.job_name == MAINTENANCE_JOB  # type: ignore[union-attr]
    site.write_config(site.merge_spec(), maintenance_job={"schedule": "weekly"})
    with pytest.raises(ConfigError, match="maintenance_job.schedule.*'weekly' is not a valid cron expression"):
        site.config()


def test_the_check_finds_a_target_due_and_the_job_compacts_it(site: Site) -> None:
    # compact: off, so the sync leaves the partitioned target's small files for the job to fold.
    maintenance = {"compact": "off", "small_files": 2, "small_file_mib": 64}
    site.write_config(site.merge_spec(maintenance=maintenance), maintenance_job={"vacuum": False})
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    due = check_results(materialize(defs, dg.AssetSelection.assets(key)))[(key.to_user_string(), TARGET_HEALTHY)]
    assert not due.passed and due.description.startswith("compaction due: ")  # type: ignore[union-attr]
    assert "small files (threshold 2)" in due.description  # type: ignore[union-attr]

    ran = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(resources=dict(defs.resources or {}))

    assert ran.success
    [observed] = [e.asset_observation_data.asset_observation for e in ran.all_events if e.is_asset_observation]
    assert observed.asset_key == key and observed.metadata["target_compaction_due"].value == "no"
    assert observed.metadata["target_files"].value == 1 and "target_last_compaction" in observed.metadata
    again = check_results(materialize(defs, dg.AssetSelection.checks_for_assets(key)))
    assert again[(key.to_user_string(), TARGET_HEALTHY)].passed
    version = site.source_version(MERGE_TABLE)
    assert_merge_target_matches(site.source_path(MERGE_TABLE), site.target(MERGE_TABLE), ["id"], version)
