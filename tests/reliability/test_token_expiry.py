"""A profile token about to expire is announced a week ahead, in ``status`` and as a Dagster check.

Same rule on both surfaces (``sharesync.pipelines.commands.status.TOKEN_WARNING_DAYS``): more than 7 days left is
fine, 7 days or fewer is a warning, an expired token is an error (the CLI refuses to start with
it; the Dagster check fails with severity ERROR).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import dagster as dg
import pytest
from support.cli_runner import CliResult
from support.reliability import Site

from sharesync.pipelines.dagster.checks import TOKEN_EXPIRY
from sharesync.pipelines.dagster.code_location import build_definitions
from sharesync.pipelines.dagster.sharesync_resource import SharesyncResource
from sharesync.sync.core.config import load_config

pytestmark = pytest.mark.slow


def _expiring_in(site: Site, days: float) -> Any:
    expires = (datetime.now(UTC) + timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")
    profile = site.root / f"expires-in-{days}.share"
    profile.write_text(json.dumps({**site.server.profile(), "expirationTime": expires}), encoding="utf-8")
    return site.write_raw(site.raw_config(site.spec("t"), profile=str(profile))), expires


def _token_check(site: Site, config_file: Any) -> dg.AssetCheckEvaluation:
    config = load_config(config_file)
    defs = build_definitions(config, SharesyncResource(config_path=str(config_file)))
    key = dg.AssetKey(["sharesync", "rel", "s", "t"])
    result = dg.materialize(
        [*(defs.assets or ()), *(defs.asset_checks or ())],  # type: ignore[list-item]
        selection=dg.AssetSelection.checks(dg.AssetCheckKey(key, TOKEN_EXPIRY)),
        resources=dict(defs.resources or {}),
        raise_on_error=False,
    )
    [evaluation] = result.get_asset_check_evaluations()
    return evaluation


@pytest.mark.parametrize(("days", "warned"), [(3, True), (6.9, True), (8, False), (30, False)])
def test_status_and_the_dagster_check_warn_a_week_ahead(
    site: Site, cli: Callable[..., CliResult], days: float, warned: bool
) -> None:
    site.table("t", rows=5)
    config_file, expires = _expiring_in(site, days)

    status = cli("--config", str(config_file), "status")
    check = _token_check(site, config_file)

    assert status.code == 0, status
    warning = f"warning: the profile's token expires at {expires.replace('Z', '+00:00')} (within 7 days)"
    assert (warning in status.out) is warned, status.out
    assert check.passed is not warned
    if warned:
        assert check.severity == dg.AssetCheckSeverity.WARN
        assert "ask the provider for a new profile" in (check.description or "")


def test_an_expired_token_stops_the_command_and_fails_the_check(site: Site, cli: Callable[..., CliResult]) -> None:
    site.table("t", rows=5)
    config_file, _ = _expiring_in(site, -1)

    for command in ("status", "sync"):
        result = cli("--config", str(config_file), command)
        assert result.code == 2
        assert (
            "the profile's bearerToken expired at" in result.err and "ask the provider for a new profile" in result.err
        )
    check = _token_check(site, config_file)
    assert not check.passed and check.severity == dg.AssetCheckSeverity.ERROR
