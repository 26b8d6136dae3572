"""What starts syncs: the ``sharesync_source_versions`` sensor and the schedules from the config.

The sensor polls every table's version concurrently (one cheap ``/version`` call each;
minimum interval ``sensor_interval_seconds``, default 30 s, the protocol's guidance for
streaming readers) and requests a run only for tables whose provider version differs from
their checkpoint, with run key ``name@version``. Its cursor remembers what it requested and
observed, so a tick without changes requests nothing and records nothing. As with run keys,
a version is requested once: a run that failed for good is not requested again until the
provider moves on (fix the cause, then materialize from the UI). Each run carries the tag
``sharesync/table`` (for per-table run limits) and selects one table with its checks.

A table whose checkpoint is at the provider's version but was written for another target or
mode than the config names now (the config moved it) gets one run as well, keyed
``name@version/target@<hash of target, mode and the checkpoint's write time>``: the syncer
bootstraps the configured target (:attr:`~sharesync.sync.planning.BootstrapReason.TARGET_CHANGED`),
and without that run the new target would stay empty until the provider commits again. The sensor compares with the
syncer's own rule, against the config file as it is now — the one a run reads — not as it was
when the definitions loaded. The same once-only policy applies: a rebuild that failed for good
(a move into or out of history mode is refused, see ``sharesync reset``) is requested again
only when the version, target, mode or checkpoint changes.

A table with ``freshness_minutes`` that sits at its checkpoint also gets a confirming run
(a no-op sync) once its last materialization is a third of the bound old, so that Dagster's
freshness policy, which counts time since the last materialization, stays green while the
provider is quiet (:func:`~sharesync.pipelines.dagster.freshness.confirmation_due`).

The decision is :func:`plan_tick`, pure; the sensor only gathers versions and checkpoints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dagster as dg

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.checks import routine_check_keys
from sharesync.pipelines.dagster.freshness import confirmation_due, freshness_bound
from sharesync.pipelines.dagster.retry_policy import describe
from sharesync.pipelines.dagster.selection import selection_news
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.pipelines.dagster.sources import observation
from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError
from sharesync.sync.planning.target_judgement import written_for

if TYPE_CHECKING:
    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.state import Checkpoint

SENSOR_NAME = "sharesync_source_versions"


@dataclass
class SensorCursor:
    """Per table: the last version observed, the last version a run was requested for, when
    a confirming run was last requested (epoch seconds), and the run key of the last rebuild
    requested for a config that moved the table (which names its version, target and mode)."""

    observed: dict[str, int] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    confirmed: dict[str, float] = field(default_factory=dict)
    rebuilt: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> SensorCursor:
        if not text:
            return cls()
        try:
            raw = json.loads(text)
            return cls(
                {str(k): int(v) for k, v in raw.get("observed", {}).items()},
                {str(k): int(v) for k, v in raw.get("requested", {}).items()},
                {str(k): float(v) for k, v in raw.get("confirmed", {}).items()},
                {str(k): str(v) for k, v in raw.get("rebuilt", {}).items()},
            )
        except (ValueError, TypeError, AttributeError):
            return cls()  # an unreadable cursor costs one round of repeated observations, nothing more

    def dumps(self) -> str:
        # Optional fields only when set: a cursor written before they existed reads back unchanged.
        fields: dict[str, Mapping[str, int | float | str]] = {"observed": self.observed, "requested": self.requested}
        optional: dict[str, Mapping[str, int | float | str]] = {"confirmed": self.confirmed, "rebuilt": self.rebuilt}
        return json.dumps(fields | {k: v for k, v in optional.items() if v}, sort_keys=True)

    def copy(self) -> SensorCursor:
        return SensorCursor(dict(self.observed), dict(self.requested), dict(self.confirmed), dict(self.rebuilt))


@dataclass(frozen=True)
class Tick:
    """What one sensor evaluation decided."""

    run_requests: list[dg.RunRequest]
    observations: list[dg.AssetObservation]
    cursor: SensorCursor
    errors: list[str]


def plan_tick(
    config: SharesyncConfig,
    tables: Sequence[TableConfig],
    versions: Mapping[str, int | SharesyncError],
    checkpoints: Mapping[str, Checkpoint],
    cursor: SensorCursor,
    *,
    names: naming.Names = naming.DEFAULT_NAMES,
    now: float = 0.0,
    materialized_at: Mapping[str, float] | None = None,
    configured: Mapping[str, TableConfig] | None = None,
) -> Tick:
    """Requests for tables whose source version differs from their checkpoint, once per version;
    a rebuild for a table at its checkpoint that the config moved to another target or mode,
    once per version, target and mode; confirming runs for bounded tables at their checkpoint
    (``materialized_at``: epoch seconds).

    ``configured``: each table as the config file names it now, which is what a run syncs (the
    resource reads the file afresh); ``tables`` are as the definitions loaded them, and name
    the assets and checks a run selects. A table missing from it is compared as in ``tables``.
    """
    new = cursor.copy()
    requests: list[dg.RunRequest] = []
    observations: list[dg.AssetObservation] = []
    errors: list[str] = []
    for table in tables:
        polled = versions.get(table.key)
        if polled is None:
            continue
        if isinstance(polled, SharesyncError):
            errors.append(f"{table.key}: cannot read the provider's version: {describe(polled)}")
            continue
        if new.observed.get(table.key) != polled:
            observations.append(observation(table, polled, names))
            new.observed[table.key] = polled
        checkpoint = checkpoints.get(table.key)
        # Behind, or not synced yet. A version *below* the checkpoint means the provider
        # re-created the table: the syncer re-bootstraps, so that is a request too.
        if checkpoint is not None and checkpoint.version == polled:
            now_table = (configured or {}).get(table.key, table)
            if not written_for(checkpoint, now_table):
                key = naming.rebuild_run_key(now_table, polled, checkpoint.updated_at)
                if new.rebuilt.get(table.key) != key:
                    requests.append(run_request(config, table, key, names))
                    new.rebuilt[table.key] = key
                continue  # a confirming run would only attempt the same rebuild
            bound = freshness_bound(config, table)
            last = (materialized_at or {}).get(table.key)
            if bound is not None and confirmation_due(bound, last, new.confirmed.get(table.key), now):
                key = f"{naming.run_key(table, polled)}/confirm@{int(now)}"
                requests.append(run_request(config, table, key, names))
                new.confirmed[table.key] = now
            continue
        if new.requested.get(table.key) == polled:
            continue
        requests.append(run_request(config, table, naming.run_key(table, polled), names))
        new.requested[table.key] = polled
    return Tick(requests, observations, new, errors)


def run_request(
    config: SharesyncConfig,
    table: TableConfig,
    run_key: str,
    names: naming.Names = naming.DEFAULT_NAMES,
) -> dg.RunRequest:
    """One run of ``table`` with its routine checks, tagged for per-table run limits."""
    return dg.RunRequest(
        run_key=run_key,
        asset_selection=[names.asset_key(table)],
        asset_check_keys=routine_check_keys(config, table, names),
        tags={naming.TABLE_TAG: table.key},
    )


def build_source_sensor(
    config: SharesyncConfig,
    *,
    names: naming.Names = naming.DEFAULT_NAMES,
    default_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.RUNNING,
) -> dg.SensorDefinition | None:
    if not config.tables:
        return None
    tables = list(config.tables)
    bounded = [t for t in tables if freshness_bound(config, t) is not None]

    @dg.sensor(
        name=SENSOR_NAME,
        minimum_interval_seconds=config.sensor_interval_seconds,
        target=dg.AssetSelection.assets(*[names.asset_key(t) for t in tables]),
        default_status=default_status,
        description=(
            "Requests a sync of each table whose provider version moved past its checkpoint, "
            "and a rebuild of each table the config moved to another target or mode."
        ),
    )
    def sharesync_source_versions(context: dg.SensorEvaluationContext, sharesync: SharesyncResource) -> dg.SensorResult:
        cursor = SensorCursor.parse(context.cursor)
        with sharesync.syncer() as syncer:
            try:
                live = _follow_selection(context, syncer, tables)
                versions = syncer.source_versions([t.key for t in live])
                checkpoints = {c.name: c for c in syncer.resources.store.list_checkpoints()}
            except SharesyncError as exc:  # profile or state store: nothing can be decided this tick
                raise dg.Failure(description=describe(exc)) from None
            # What a run will sync: the config file now, which may have moved a table since load.
            configured = {t.key: t for t in syncer.config.tables}
        materialized = _materialized_at(context, bounded, names)
        tick = plan_tick(
            config,
            live,
            versions,
            checkpoints,
            cursor,
            names=names,
            now=time.time(),
            materialized_at=materialized,
            configured=configured,
        )
        for error in tick.errors:
            context.log.warning(error)
        if tick.run_requests:
            return dg.SensorResult(
                run_requests=tick.run_requests, asset_events=list(tick.observations), cursor=tick.cursor.dumps()
            )
        skip = f"{len(tables) - len(tick.errors)} of {len(tables)} tables at their checkpoint or already requested"
        return dg.SensorResult(skip_reason=skip, asset_events=list(tick.observations), cursor=tick.cursor.dumps())

    return sharesync_source_versions


def _follow_selection(
    context: dg.SensorEvaluationContext, syncer: Syncer, tables: list[TableConfig]
) -> list[TableConfig]:
    """The loaded tables to poll; with ``include:`` patterns, the shares are listed and the tick's
    log says which tables are new at the provider (a reload adds them) or removed there."""
    if not syncer.declared.include:
        return tables
    selection = syncer.select()
    news = selection_news(tables, list(selection.tables), list(selection.removed))
    for line in news.lines():
        context.log.info(line)
    gone = {t.key for t in news.removed}
    return [t for t in tables if t.key not in gone]


def _materialized_at(
    context: dg.SensorEvaluationContext, tables: Sequence[TableConfig], names: naming.Names
) -> dict[str, float]:
    """When each table with a freshness bound last materialized (one event-log query each)."""
    found = {t.key: context.instance.get_latest_materialization_event(names.asset_key(t)) for t in tables}
    return {name: event.timestamp for name, event in found.items() if event is not None}


def build_schedules(
    config: SharesyncConfig,
    *,
    names: naming.Names = naming.DEFAULT_NAMES,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.RUNNING,
) -> list[dg.ScheduleDefinition]:
    """One schedule per table with a ``schedule`` (its own, else ``defaults.schedule``), in UTC."""
    schedules = []
    for table in config.tables:
        cron = table.schedule or config.defaults.schedule
        if cron is None:
            continue
        schedules.append(
            dg.ScheduleDefinition(
                name=naming.schedule_name(table),
                cron_schedule=cron,
                execution_timezone="UTC",
                target=dg.AssetSelection.assets(names.asset_key(table)),
                tags={naming.TABLE_TAG: table.key},
                default_status=default_status,
                description=f"Sync {table.key} on '{cron}' (UTC).",
            )
        )
    return schedules
