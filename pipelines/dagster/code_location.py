"""Build the Dagster code location from a sharesync config (``sharesync.pipelines.dagster.definitions`` exposes it).

Building reads and validates the config only — no profile, no state store, no network —
so a bad config fails at load with the field path and a fix, and a provider that is down
never stops the UI from loading; a config with ``include:`` patterns lists the selected shares
at load (:mod:`~sharesync.pipelines.dagster.selection`). Tests call :func:`build_definitions` directly.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from sharesync.pipelines.dagster.assets import DEFAULT_RETRY_POLICY, build_table_assets
from sharesync.pipelines.dagster.automation import build_automation_sensor
from sharesync.pipelines.dagster.checks import build_table_checks
from sharesync.pipelines.dagster.maintenance_job import build_maintenance
from sharesync.pipelines.dagster.naming import DEFAULT_NAMES, Names
from sharesync.pipelines.dagster.selection import with_selection
from sharesync.pipelines.dagster.sensors import build_schedules, build_source_sensor
from sharesync.pipelines.dagster.sharesync_resource import RESOURCE_KEY, SharesyncResource
from sharesync.pipelines.dagster.sources import build_source_observer
from sharesync.sync.core.config import SharesyncConfig, config_path, load_config
from sharesync.sync.core.redact import install_log_redaction


def build_definitions(
    config: SharesyncConfig,
    resource: SharesyncResource,
    *,
    names: Names = DEFAULT_NAMES,
    retry_policy: dg.RetryPolicy = DEFAULT_RETRY_POLICY,
    sensor_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
    schedule_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.RUNNING,
) -> dg.Definitions:
    """Assets, checks, the source observer, what starts syncs (the source sensor, or the
    declarative automation sensor), the maintenance job and the schedules of ``config``; pure and offline."""
    install_log_redaction()  # sharesync's and libraries' log records reach Dagster's event log redacted
    observer = build_source_observer(config, names)
    jobs, maintenance_schedules = build_maintenance(config, names, schedule_status)
    return dg.Definitions(
        assets=[*build_table_assets(config, retry_policy=retry_policy, names=names), *([observer] if observer else [])],
        asset_checks=build_table_checks(config, names),
        sensors=_sensors(config, names, sensor_status),
        jobs=jobs,
        schedules=[*build_schedules(config, names=names, default_status=schedule_status), *maintenance_schedules],
        resources={RESOURCE_KEY: resource},
    )


def _sensors(config: SharesyncConfig, names: Names, status: dg.DefaultSensorStatus) -> list[dg.SensorDefinition]:
    if not config.tables:
        return []
    if config.automation == "declarative":
        keys = [key for t in config.tables for key in (names.asset_key(t), names.source_key(t))]
        return [build_automation_sensor(keys, interval_seconds=config.sensor_interval_seconds, default_status=status)]
    sensor = build_source_sensor(config, names=names, default_status=status)
    return [sensor] if sensor else []


def load_definitions(path: str | Path | None = None) -> dg.Definitions:
    """Definitions for the config at ``path`` (else ``SHARESYNC_CONFIG``, else ``./sharesync.yaml``)."""
    file = config_path(path).resolve()
    config = with_selection(load_config(file))
    return build_definitions(config, SharesyncResource(config_path=str(file)))
