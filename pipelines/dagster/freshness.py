"""Freshness of a table's copy, two ways: Dagster's native policy and sharesync's ``freshness`` check.

``freshness_minutes`` becomes a :meth:`dagster.FreshnessPolicy.time_window` with
``fail_window`` = the bound and ``warn_window`` = half of it: the asset's health turns yellow
half-way, early enough to act, and red at the bound the user wrote. Dagster's floor is one
minute for both windows, so a bound under two minutes gets no warning and one under a minute
is raised to a minute.

The policy measures the time since the last *materialization*. The ``freshness`` check
measures what the policy cannot: how far the copy is behind the *provider* — the age of the
oldest source commit not yet applied, 0 at the provider's version however long ago that
was. Only the check tells "the provider was quiet" (lag 0) from "the sync is stuck" (lag
grows), and it records ``lag_seconds`` and ``versions_behind``. To keep the policy honest
through quiet periods, a table with a bound is confirmed by a no-op sync once its last
materialization is a third of the bound old (:func:`confirmation_due`; the sensor asks for it,
declarative automation does it when the policy warns).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import dagster as dg

from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.protocol.commit_time import version_commit_time

if TYPE_CHECKING:
    from sharesync.pipelines.run.pass_resources import TableAccess
    from sharesync.state import Checkpoint

FRESHNESS = "freshness"
WARN = dg.AssetCheckSeverity.WARN
MIN_WINDOW = timedelta(minutes=1)  # Dagster refuses shorter windows
CONFIRM_SHARE = 3  # confirm a quiet table after a third of its bound, before the policy warns at half


def freshness_bound(config: SharesyncConfig, table: TableConfig) -> float | None:
    """The table's lag bound in minutes: its own, else the defaults', else none."""
    return table.freshness_minutes or config.defaults.freshness_minutes


def freshness_policy(bound_minutes: float | None) -> dg.FreshnessPolicy | None:
    """Fail at the bound, warn at half of it (see the module docstring)."""
    if bound_minutes is None:
        return None
    fail = max(timedelta(minutes=bound_minutes), MIN_WINDOW)
    warn = fail / 2
    return dg.FreshnessPolicy.time_window(fail_window=fail, warn_window=warn if warn >= MIN_WINDOW else None)


def confirmation_due(
    bound_minutes: float, materialized_at: float | None, confirmed_at: float | None, now: float
) -> bool:
    """Whether a table at its checkpoint needs a no-op sync so the policy sees it was checked.

    Never materialized: no (the first sync is requested anyway). Otherwise when the last
    materialization and the last confirmation request are both a third of the bound old.
    """
    if materialized_at is None:
        return False
    every = bound_minutes * 60 / CONFIRM_SHARE
    return now - materialized_at >= every and (confirmed_at is None or now - confirmed_at >= every)


def freshness_check(access: TableAccess, table: TableConfig, now: datetime | None = None) -> dg.AssetCheckResult:
    bound = freshness_bound(access.config, table)
    assert bound is not None, "the freshness check exists only with a bound"
    checkpoint = access.store.get_checkpoint(table.key)
    client = access.client_for(table.provider)
    source = client.table_version(table.name).version
    oldest = None
    if checkpoint is not None and checkpoint.version < source:
        oldest = version_commit_time(client, table.name, checkpoint.version + 1, previous=checkpoint.version_timestamp)
    return freshness_verdict(bound, checkpoint, source, oldest, now or datetime.now(UTC))


def freshness_verdict(
    bound_minutes: float,
    checkpoint: Checkpoint | None,
    source_version: int,
    oldest_unapplied_commit: datetime | None,
    now: datetime,
) -> dg.AssetCheckResult:
    """Lag = age of the oldest source commit the target lacks (0 when at the provider's version).

    When that commit's time is unknown, the checkpoint's own commit time (or, failing that,
    the last sync) bounds it from above: the missing commit cannot be older.
    """
    bound = bound_minutes * 60
    metadata: dict[str, dg.RawMetadataValue] = {"bound_seconds": bound, "source_version": source_version}
    if checkpoint is None:
        return dg.AssetCheckResult(check_name=FRESHNESS, passed=False, metadata=metadata, description="never synced")
    metadata |= {
        "checkpoint_version": checkpoint.version,
        "versions_behind": max(0, source_version - checkpoint.version),
    }
    if checkpoint.version == source_version:
        metadata["lag_seconds"] = 0.0
        return dg.AssetCheckResult(
            check_name=FRESHNESS, passed=True, metadata=metadata, description="at the provider's version"
        )
    since = oldest_unapplied_commit or checkpoint.version_timestamp or checkpoint.updated_at
    if since is None:
        return dg.AssetCheckResult(
            check_name=FRESHNESS,
            passed=False,
            severity=WARN,
            metadata=metadata,
            description=f"behind (version {checkpoint.version} of {source_version}); commit times unknown",
        )
    lag = max(0.0, (now - since).total_seconds())
    metadata["lag_seconds"] = round(lag, 3)
    passed = lag <= bound
    return dg.AssetCheckResult(
        check_name=FRESHNESS,
        passed=passed,
        metadata=metadata,
        description=f"lag {lag / 60:.1f} min {'within' if passed else 'over'} the bound of {bound_minutes:g} min "
        f"(version {checkpoint.version} of {source_version})",
    )
