"""``target_healthy``: the target needs no compaction (deletion vectors and small files under the thresholds).

It warns — a target past a threshold reads slower, it is not wrong — and carries the health
figures as metadata, so the UI shows the trend. A sync compacts by itself after a batch
(``maintenance.compact: auto``); this check is what shows a target that sync left as it was
(``compact: off``, or one smaller than a well-sized file), and what the maintenance job fixes.
"""

# No `from __future__ import annotations`: Dagster reads annotations of ops as objects.

from typing import TYPE_CHECKING

import dagster as dg

from sharesync.pipelines.dagster.materialization import health_metadata
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.health import TargetHealth, Thresholds, compaction_reason
from sharesync.sync.core.config import TableConfig

if TYPE_CHECKING:
    from sharesync.pipelines.run.pass_resources import TableAccess

__all__ = ["TARGET_HEALTHY", "health_verdict", "target_health_check"]

TARGET_HEALTHY = "target_healthy"


def target_health_check(access: "TableAccess", table: TableConfig) -> dg.AssetCheckResult:
    thresholds = Thresholds.of(access.config.maintenance(table))
    return health_verdict(DELTA.health(access.locate(table.target), thresholds), thresholds)


def health_verdict(health: TargetHealth | None, thresholds: Thresholds) -> dg.AssetCheckResult:
    """Passed when no threshold is reached; a warning naming the one that is, otherwise."""
    if health is None:
        return dg.AssetCheckResult(check_name=TARGET_HEALTHY, passed=True, description="no target table yet")
    reason = compaction_reason(health, thresholds)
    return dg.AssetCheckResult(
        check_name=TARGET_HEALTHY,
        passed=reason is None,
        severity=dg.AssetCheckSeverity.WARN,
        description=health.describe() if reason is None else f"compaction due: {reason} ('sharesync optimize')",
        metadata=health_metadata(health, thresholds),
    )
