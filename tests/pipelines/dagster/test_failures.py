"""Failed syncs: permanent errors fail at once, transient ones retry, and no secret reaches the event log."""

from __future__ import annotations

import json

import dagster as dg
import pytest
from support.dagster_site import MERGE_TABLE, Site, event_texts, materialize

pytestmark = pytest.mark.slow


def _events(result: dg.ExecuteInProcessResult, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
    return [e for e in result.all_events if e.event_type == kind]


def test_a_permanent_error_fails_the_run_at_once_with_the_redacted_message(
    site: Site, instance: dg.DagsterInstance
) -> None:
    wrong = site.root / "wrong.share"
    secret = "wrong-token-that-must-never-show"
    wrong.write_text(json.dumps({"shareCredentialsVersion": 1, "endpoint": site.server.endpoint, "bearerToken": secret}))
    site.write_config(site.merge_spec(), profile=wrong)

    result = materialize(
        site.definitions(), dg.AssetSelection.assets(site.key(MERGE_TABLE)).without_checks(),
        instance=instance, raise_on_error=False,
    )

    assert not result.success
    assert not _events(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    [failure] = _events(result, dg.DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.error.message  # type: ignore[union-attr]
    assert "dg.sales.orders" in message and "401" in message
    logged = event_texts(instance, [result.run_id])
    assert secret not in logged and site.server.token not in logged


def test_a_transient_error_is_retried_by_the_retry_policy(
    site: Site, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "1")  # the client gives up at once; Dagster retries
    defs = site.definitions()
    site.server.faults.error_status = 503
    site.server.faults.error_rate = 1.0
    site.server.faults.budget = 1

    result = materialize(
        defs, dg.AssetSelection.assets(site.key(MERGE_TABLE)).without_checks(), instance=instance
    )

    assert result.success
    [retry] = _events(result, dg.DagsterEventType.STEP_UP_FOR_RETRY)
    assert "503" in str(retry.event_specific_data)


def test_no_presigned_url_or_token_reaches_the_event_log(
    site: Site, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "1")
    defs = site.definitions()
    site.server.faults.file_size_delta = 3  # every download is the wrong size: a DownloadError naming the file

    result = materialize(
        defs, dg.AssetSelection.assets(site.key(MERGE_TABLE)).without_checks(), instance=instance,
        raise_on_error=False,
    )

    assert not result.success
    logged = event_texts(instance, [result.run_id])
    assert "sig=" not in logged and "exp=" not in logged
    assert site.server.token not in logged
    [failure] = _events(result, dg.DagsterEventType.STEP_FAILURE)
    # Retries used up: Dagster reports that, with the redacted sharesync failure as its cause.
    described = failure.step_failure_data.user_failure_data.description  # type: ignore[union-attr]
    assert described.startswith("dg.sales.orders: download file")
