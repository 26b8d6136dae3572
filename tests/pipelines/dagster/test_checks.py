"""Asset checks: pure verdicts with fixed clocks, then the real checks on synced and tampered targets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest
from deltalake import DeltaTable
from support.dagster_site import APPEND_TABLE, MERGE_TABLE, Site, check_results, materialize

from sharesync.pipelines.dagster.checks import ROW_COUNT, TOKEN_EXPIRY, row_count_verdict, token_expiry_verdict
from sharesync.pipelines.dagster.freshness import FRESHNESS, freshness_verdict
from sharesync.pipelines.dagster.health_check import TARGET_HEALTHY
from sharesync.pipelines.dagster.target_checks import KEYS_UNIQUE, SCHEMA_DRIFT
from sharesync.pipelines.targets.delta.rows import read_rows
from sharesync.state import Checkpoint

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
WARN, ERROR = dg.AssetCheckSeverity.WARN, dg.AssetCheckSeverity.ERROR


def _checkpoint(version: int, committed: datetime | None = None) -> Checkpoint:
    return Checkpoint("a.b.c", version, "id", "fp", "/t", "merge", version_timestamp=committed)


# ---------------------------------------------------------------- verdicts


def test_row_count_verdicts() -> None:
    assert row_count_verdict(4, 10, 10).passed
    differs = row_count_verdict(4, 9, 10)
    assert not differs.passed and differs.severity == ERROR and differs.metadata["difference"].value == -1
    unknown = row_count_verdict(4, 9, None)
    assert unknown.passed and unknown.description.startswith("skipped")  # type: ignore[union-attr]
    assert not row_count_verdict(4, None, 10).passed  # the target vanished


@pytest.mark.parametrize(
    ("checkpoint", "source", "oldest", "passed", "lag"),
    [
        (_checkpoint(5, NOW - timedelta(days=3)), 5, None, True, 0.0),  # at the provider's version, however old
        (_checkpoint(5, NOW - timedelta(days=3)), 7, NOW - timedelta(minutes=10), True, 600.0),
        (_checkpoint(5, NOW - timedelta(days=3)), 7, NOW - timedelta(minutes=90), False, 5400.0),
        (_checkpoint(5, NOW - timedelta(minutes=30)), 7, None, True, 1800.0),  # unknown: the checkpoint bounds it
    ],
)
def test_freshness_verdicts(
    checkpoint: Checkpoint, source: int, oldest: datetime | None, passed: bool, lag: float
) -> None:
    result = freshness_verdict(60, checkpoint, source, oldest, NOW)
    assert result.passed is passed
    assert result.metadata["lag_seconds"].value == lag


def test_freshness_fails_before_the_first_sync_and_warns_when_times_are_unknown() -> None:
    assert not freshness_verdict(60, None, 3, None, NOW).passed
    unknown = freshness_verdict(60, _checkpoint(2), 3, None, NOW)
    assert not unknown.passed and unknown.severity == WARN


@pytest.mark.parametrize(
    ("expires", "passed", "severity"),
    [
        (None, True, ERROR),
        (NOW + timedelta(days=30), True, ERROR),
        (NOW + timedelta(days=3), False, WARN),
        (NOW - timedelta(hours=1), False, ERROR),
    ],
)
def test_token_expiry_verdicts(expires: datetime | None, passed: bool, severity: dg.AssetCheckSeverity) -> None:
    result = token_expiry_verdict(expires, NOW)
    assert (result.passed, result.severity) == (passed, severity)


# ---------------------------------------------------------------- on real targets


@pytest.mark.slow
def test_checks_pass_on_a_synced_table_and_fail_once_the_target_is_tampered_with(site: Site) -> None:
    site.write_config(site.merge_spec(freshness_minutes=60), site.append_spec())
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    synced = check_results(materialize(defs, dg.AssetSelection.assets(key, site.key(APPEND_TABLE))))
    orders = "sharesync/dg/sales/orders"
    assert {name for (asset, name) in synced if asset == orders} == {
        ROW_COUNT,
        FRESHNESS,
        TOKEN_EXPIRY,
        KEYS_UNIQUE,
        SCHEMA_DRIFT,
        TARGET_HEALTHY,
    }
    assert all(evaluation.passed for evaluation in synced.values()), synced
    assert synced[("sharesync/dg/sales/events", ROW_COUNT)].description.startswith("skipped")  # type: ignore[union-attr]

    target = DeltaTable(site.target(MERGE_TABLE))
    rows = read_rows(target).num_rows
    target.delete("id <= 3")  # somebody edits the copy behind sharesync's back

    checked = check_results(materialize(defs, dg.AssetSelection.checks_for_assets(key)))
    row_count = checked[(orders, ROW_COUNT)]
    assert not row_count.passed
    assert row_count.metadata["source_rows"].value == rows
    assert row_count.metadata["target_rows"].value < rows
    assert checked[(orders, FRESHNESS)].passed  # still at the provider's version


@pytest.mark.slow
def test_token_expiring_within_a_week_warns(site: Site) -> None:
    profile = site.root / "expiring.share"
    expires = (datetime.now(UTC) + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    profile.write_text(json.dumps({**site.server.profile(), "expirationTime": expires}))
    site.write_config(site.merge_spec(), profile=profile)
    defs = site.definitions()

    checked = check_results(materialize(defs, dg.AssetSelection.checks_for_assets(site.key(MERGE_TABLE))))

    token = checked[("sharesync/dg/sales/orders", TOKEN_EXPIRY)]
    assert not token.passed and token.severity == WARN
    assert not checked[("sharesync/dg/sales/orders", ROW_COUNT)].passed  # never synced


@pytest.mark.slow
def test_row_count_counts_only_live_rows_with_soft_deletes(site: Site) -> None:
    site.write_config(site.merge_spec(soft_delete=True))
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    materialize(defs, dg.AssetSelection.assets(key).without_checks())
    DeltaTable(str(site.source_path(MERGE_TABLE))).delete("id <= 5")  # the provider deletes rows

    checked = check_results(materialize(defs, dg.AssetSelection.assets(key)))

    row_count = checked[("sharesync/dg/sales/orders", ROW_COUNT)]
    assert row_count.passed, row_count.description
    flagged = read_rows(DeltaTable(site.target(MERGE_TABLE))).column("_sharesync_deleted").to_pylist()
    assert any(flagged)  # the deleted rows are still there, flagged, and not counted


@pytest.mark.slow
def test_row_count_of_a_history_target_counts_only_current_rows(site: Site) -> None:
    site.write_config(site.merge_spec(mode="history"))
    defs = site.definitions()
    key = site.key(MERGE_TABLE)
    materialize(defs, dg.AssetSelection.assets(key).without_checks())
    DeltaTable(str(site.source_path(MERGE_TABLE))).update({"amount": "amount + 1"}, predicate="id <= 5")
    materialize(defs, dg.AssetSelection.assets(key).without_checks())  # closes 5 rows, opens 5

    checked = check_results(materialize(defs, dg.AssetSelection.assets(key)))

    row_count = checked[("sharesync/dg/sales/orders", ROW_COUNT)]
    assert row_count.passed, row_count.description
    current = read_rows(DeltaTable(site.target(MERGE_TABLE))).column("_sharesync_is_current").to_pylist()
    assert row_count.metadata["target_rows"].value == sum(current)
    assert not all(current)  # the closed images are kept and not counted
