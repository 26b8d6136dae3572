"""``status`` when the provider cannot be reached: a state of the provider, not the table's error (issue 19).

Right after ``sharesync demo`` its provider has stopped. The checkpoints are fine, so ``status``
shows them with "provider unreachable" — in the table and as ``"provider": "unreachable"`` in
``--json`` — and no "last error": that stays for runs that really failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_runner import CliResult
from support.e2e import Workspace


def test_status_right_after_the_demo_says_provider_unreachable_not_last_error(
    tmp_path: Path, cli: Callable[..., CliResult]
) -> None:
    directory = tmp_path / "demo"
    assert cli("demo", "--dir", str(directory)).code == 0
    config = ("--config", str(directory / "sharesync.yaml"))

    text = cli(*config, "status")

    assert text.code == 0, text.err
    assert "last error" not in text.out and "Connection refused" not in text.out.split("provider unreachable")[0]
    assert text.out.count("provider unreachable: demo.sales.") == 2
    assert text.out.count("succeeded") == 2  # the last runs, as they were
    rows = json.loads(cli(*config, "status", "--json").out)["tables"]
    for row in rows:
        assert row["provider"] == "unreachable" and "connection refused" in row["provider_error"], row
        assert row["last_status"] == "succeeded" and row["last_error"] is None, row
        assert row["checkpoint_version"] is not None and row["source_version"] is None


def test_a_run_that_failed_keeps_its_last_error_next_to_the_provider_state(
    workspace: Workspace, cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.table("m", rows=5)
    workspace.config(workspace.spec("m"))
    config = ("--config", str(workspace.config_file))
    assert cli(*config, "sync").code == 0
    [ok] = json.loads(cli(*config, "status", "--json").out)["tables"]
    assert ok["provider"] == "ok" and ok["provider_error"] is None and ok["last_error"] is None

    workspace.server.stop()
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", "1")  # the sync's budget is not under test
    failed = cli(*config, "sync")  # a real run failure: the pass could not reach the provider
    assert failed.code == 1

    [row] = json.loads(cli(*config, "status", "--json").out)["tables"]
    assert row["provider"] == "unreachable"
    assert row["last_status"] == "failed" and "connection refused" in (row["last_error"] or ""), row
    text = cli(*config, "status").out
    assert "provider unreachable:" in text and "last error:" in text and "0/unreachable" in text
