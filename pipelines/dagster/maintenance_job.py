"""The Dagster job ``sharesync_maintenance``: compact where due, then vacuum, every configured target.

The same work as ``sharesync optimize`` and ``sharesync vacuum`` (each table under its sync
lease: a table a sync holds is refused, not waited for), as a job of its own so it can be
launched from the UI or scheduled (``maintenance_job.schedule``) apart from the syncs. After it,
each target's health is observed on its asset. A table it could not do fails the run, naming it.
"""

# No `from __future__ import annotations`: Dagster reads the op's `context` annotation as an object.

from collections.abc import Iterator

import dagster as dg

from sharesync.pipelines.dagster import naming
from sharesync.pipelines.dagster.materialization import health_metadata
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.health import Thresholds
from sharesync.sync.core.config import SharesyncConfig

__all__ = ["MAINTENANCE_JOB", "build_maintenance"]

MAINTENANCE_JOB = "sharesync_maintenance"


def build_maintenance(
    config: SharesyncConfig,
    names: naming.Names = naming.DEFAULT_NAMES,
    default_status: dg.DefaultScheduleStatus = dg.DefaultScheduleStatus.RUNNING,
) -> tuple[list[dg.JobDefinition], list[dg.ScheduleDefinition]]:
    """The job (none without tables) and, with ``maintenance_job.schedule``, its schedule (UTC)."""
    if not config.tables:
        return [], []
    settings = config.maintenance_job

    @dg.op(name="compact_and_vacuum_targets", out={}, description="Compact targets past a threshold, then vacuum them.")
    def maintain(context: dg.OpExecutionContext, sharesync: SharesyncResource) -> Iterator[dg.AssetObservation]:
        from sharesync.pipelines.commands.maintenance_run import optimize_tables, vacuum_tables

        with sharesync.syncer() as syncer:
            done = optimize_tables(syncer, [], force=False)
            if settings.vacuum:
                done += vacuum_tables(syncer, [], retain_hours=settings.retain_hours)
            for line in done:
                (context.log.info if line.ok else context.log.error)(f"{line.name}: {line.line}")
            for table in syncer.config.tables:
                thresholds = Thresholds.of(syncer.config.maintenance(table))
                health = DELTA.health(syncer.resources.locate(table.target), thresholds)
                if health is not None:
                    yield dg.AssetObservation(names.asset_key(table), metadata=health_metadata(health, thresholds))
        failed = sorted({line.name for line in done if not line.ok})
        if failed:
            raise dg.Failure(description=f"maintenance could not be done for {', '.join(failed)} (see the run's log)")

    @dg.job(
        name=MAINTENANCE_JOB, description="Compaction where due, then vacuum, of every target (docs/maintenance.md)."
    )
    def job() -> None:
        maintain()

    if settings.schedule is None:
        return [job], []
    schedule = dg.ScheduleDefinition(
        name=f"{MAINTENANCE_JOB}_schedule",
        cron_schedule=settings.schedule,
        execution_timezone="UTC",
        job=job,
        default_status=default_status,
        description=f"Maintenance of every target on '{settings.schedule}' (UTC).",
    )
    return [job], [schedule]
