"""Several providers, one pass (issue 43 §3): a provider that is down costs one retry budget, and a
refused credential names the provider and its profile file.

Real HTTP to local servers: a provider "down" answers every call with a gateway's 503 (the
server's ``faults``, which count what they answered), so the number of calls that reached it is
exact — no timing. Every table fails at its ``/version`` call, so no pass here needs Spark.
Provider tables are written by deltalake.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from support.cli_runner import CliResult
from support.faults import SharingServer

from sharesync.pipelines.run.circuit import ProviderCircuits, provider_down
from sharesync.pipelines.run.results import TableOutcome
from sharesync.pipelines.run.sync_pass import Syncer
from sharesync.sync.core.config import SharesyncConfig, parse_config
from sharesync.sync.core.errors import NotFound, ServerError, TransportError, Unauthorized
from sharesync.sync.server.samples import create_sample_table, table_path

ATTEMPTS = 3


@pytest.fixture(autouse=True)
def short_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SHARESYNC_RETRY_MAX_ATTEMPTS", str(ATTEMPTS))
    monkeypatch.setenv("SHARESYNC_RETRY_TOTAL_SECONDS", "5")


def _down(server: SharingServer) -> None:
    server.faults.error_status = 503  # a gateway's answer for a provider that is gone
    server.faults.error_rate = 1.0


def _provider(root: Path, share: str, names: list[str]) -> Path:
    for name in names:
        create_sample_table(table_path(root, share, "s", name), rows=2, partitioned=False)
    return root


def _config(tmp_path: Path, providers: dict[str, Path], tables: dict[str, list[str]]) -> SharesyncConfig:
    entries = [
        {"name": name, "provider": provider, "target": f"warehouse/{provider}/{name}", "mode": "snapshot"}
        for provider, names in tables.items()
        for name in names
    ]
    raw = {
        "providers": {p: {"profile": str(path)} for p, path in providers.items()},
        "state_store": "sqlite:///state.db",
        "staging_dir": "staging",
        "tables": entries,
    }
    return parse_config(raw, base_dir=tmp_path)


def test_a_pass_over_a_provider_that_is_down_asks_it_once_per_table_budget(
    tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    names = [f"dead.s.t{i}" for i in range(5)]
    dead = start_server(_provider(tmp_path / "dead", "dead", [n.split(".")[2] for n in names]))
    _down(dead)
    assert dead.profile_path is not None
    config = _config(tmp_path, {"dead": dead.profile_path}, {"dead": names})

    with Syncer(config) as syncer:
        results = syncer.sync_all()

    assert [r.outcome for r in results] == [TableOutcome.FAILED] * len(names)
    first, *rest = [r.error or "" for r in results]
    assert "HTTP 503" in first and rest == [f"provider 'dead' is down (not asked again this pass): {first}"] * 4
    # Without the circuit: 5 tables × 3 attempts. The first table spent the budget, the rest none.
    assert dead.faults.faulted == ATTEMPTS


def test_status_asks_each_provider_first_then_fails_a_dead_ones_tables_at_once(
    tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    dead = start_server(_provider(tmp_path / "dead", "dead", ["a", "b", "c"]))
    alive = start_server(_provider(tmp_path / "alive", "alive", ["x", "y"]))
    _down(dead)
    assert dead.profile_path is not None and alive.profile_path is not None
    config = _config(
        tmp_path,
        {"dead": dead.profile_path, "alive": alive.profile_path},
        {"dead": ["dead.s.a", "dead.s.b", "dead.s.c"], "alive": ["alive.s.x", "alive.s.y"]},
    )

    with Syncer(config) as syncer:
        versions = syncer.source_versions()

    assert versions["alive/alive.s.x"] == 0 and versions["alive/alive.s.y"] == 0
    failures = [versions[f"dead/dead.s.{n}"] for n in "abc"]
    assert all(isinstance(f, ServerError) for f in failures)
    assert [str(f).endswith(str(failures[0])) for f in failures] == [True] * 3
    assert dead.faults.faulted == ATTEMPTS


def test_a_refused_token_names_the_provider_and_its_profile_file(
    tmp_path: Path, start_server: Callable[..., SharingServer]
) -> None:
    beta = start_server(_provider(tmp_path / "beta", "beta", ["t"]))
    assert beta.profile_path is not None
    profile = tmp_path / "profiles" / "beta.share"
    profile.parent.mkdir()
    profile.write_text(beta.profile_path.read_text().replace(beta.settings.bearer_token or "", "not-the-token-123"))
    config = _config(tmp_path, {"beta": profile}, {"beta": ["beta.s.t"]})

    with Syncer(config) as syncer:
        [result] = syncer.sync_all()
        [status] = syncer.source_versions().values()

    assert result.outcome is TableOutcome.FAILED and isinstance(result.exception, Unauthorized)
    assert (result.error or "").startswith(f"provider 'beta' ({profile}): "), result.error
    assert "HTTP 401" in (result.error or "") and "not-the-token-123" not in (result.error or "")
    assert str(status).startswith(f"provider 'beta' ({profile}): ") and "HTTP 401" in str(status)


def test_only_no_answer_or_a_gateways_answer_opens_the_circuit() -> None:
    circuits = ProviderCircuits()
    circuits.trip("p", NotFound(404, None, "no such table"))
    circuits.trip("p", ServerError(500, None, "this table's log is corrupt"))
    assert circuits.reason("p") is None
    refused = TransportError("GET /version: connection failed (refused)")
    circuits.trip("p", refused)
    circuits.trip("p", ServerError(503, None, "later reason"))
    reason = circuits.reason("p")
    assert isinstance(reason, TransportError) and reason is not refused  # a copy to raise, the first reason
    assert str(reason) == f"provider 'p' is down (not asked again this pass): {refused}"
    assert circuits.reason("q") is None
    assert provider_down(ServerError(502, None, "bad gateway")) and not provider_down(ValueError("x"))


def test_sync_json_prints_every_field_of_the_results_table(
    tmp_path: Path, start_server: Callable[..., SharingServer], cli: Callable[..., CliResult]
) -> None:
    dead = start_server(_provider(tmp_path / "dead", "dead", ["a", "b"]))
    _down(dead)
    assert dead.profile_path is not None
    config = tmp_path / "sharesync.yaml"
    config.write_text(
        f"providers: {{dead: {{profile: {dead.profile_path}}}}}\nstate_store: sqlite:///state.db\n"
        "tables:\n  - {name: dead.s.a, provider: dead, target: w/a, mode: snapshot}\n"
        "  - {name: dead.s.b, provider: dead, target: w/b, mode: snapshot}\n",
        encoding="utf-8",
    )
    run = cli("--config", str(config), "sync", "--json")
    assert run.code == 1, run.err
    rows = json.loads(run.out)["tables"]
    assert [(r["name"], r["outcome"]) for r in rows] == [("dead/dead.s.a", "failed"), ("dead/dead.s.b", "failed")]
    assert set(rows[0]) >= {"first_version", "checkpoint_version", "changes", "files_downloaded", "seconds", "error"}
    assert "HTTP 503" in rows[1]["error"] and dead.faults.faulted == ATTEMPTS


def test_sync_every_json_prints_a_line_per_pass(
    tmp_path: Path, start_server: Callable[..., SharingServer], cli: Callable[..., CliResult]
) -> None:
    dead = start_server(_provider(tmp_path / "dead", "dead", ["a"]))
    _down(dead)
    assert dead.profile_path is not None
    config = tmp_path / "sharesync.yaml"
    config.write_text(
        f"profile: {dead.profile_path}\nstate_store: sqlite:///state.db\n"
        "tables:\n  - {name: dead.s.a, target: w/a, mode: snapshot}\n",
        encoding="utf-8",
    )
    run = cli("--config", str(config), "sync", "--every", "1s", "--passes", "2", "--json")
    assert run.code == 1, run.err
    passes = [json.loads(line) for line in run.out.splitlines()]
    assert [(p["pass"], [t["outcome"] for t in p["tables"]]) for p in passes] == [(1, ["failed"]), (2, ["failed"])]
