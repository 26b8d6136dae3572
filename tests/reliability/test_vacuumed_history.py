"""History vacuumed at a real provider: re-bootstrap with a warning, never a table failed for good.

A real provider shows lost history in shapes the local server's knobs reproduce: presigned URLs
of files VACUUM removed, answered by storage with 404 or 410 (the reference server presigns
without checking the files exist); and the reference servers' history errors on ``/changes``,
recognised by error code and message pattern. A change batch meeting either is re-bootstrapped
from the snapshot, as for a gap the planner sees. A snapshot file gone between listing and
download is listed again once; gone again, the table fails with a clear, transient error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Literal, cast

import pytest
from deltalake import DeltaTable
from support.cli_runner import CliResult
from support.faults import HISTORY_ERRORS, HistoryError
from support.reliability import Expectation, Site, assert_at_checkpoint

pytestmark = pytest.mark.slow

GAP = "no longer serves versions from"


def _merge_and_append(site: Site) -> dict[str, Expectation]:
    for seed, table in enumerate(("m", "a")):
        site.table(table, rows=30, seed=seed)
    site.config(site.spec("m"), site.spec("a", "append"))
    return {"m": Expectation("m", "merge"), "a": Expectation("a", "append", bootstrap=0)}


def _sync(site: Site, cli: Callable[..., CliResult]) -> CliResult:
    return cli("--config", str(site.config_file), "sync")


def _assert_rebootstrapped(
    site: Site, cli: Callable[..., CliResult], expect: dict[str, Expectation], before: int, cause: str
) -> None:
    """Both tables re-bootstrapped with the warning on record, after a failed batch that says
    ``cause``; the append log kept up to ``before``."""
    status = {
        row["name"]: row for row in json.loads(cli("--config", str(site.config_file), "status", "--json").out)["tables"]
    }
    for table, expectation in expect.items():
        assert status[site.name(table)]["last_status"] == "succeeded"
        bootstrap, failed = site.store().runs_for(site.name(table), limit=2)
        assert bootstrap.start_version == bootstrap.end_version == site.version(table), bootstrap
        assert failed.status.value == "failed" and cause in (failed.error or ""), failed
        assert GAP in str(status[site.name(table)]["last_warning"]), status
        if expectation.mode == "append":  # the log continues: the snapshot lands as inserts at its version
            expectation.bootstrap, expectation.above = site.version(table), before
        assert_at_checkpoint(site, expectation)


@pytest.mark.parametrize("status", [404, 410])
def test_change_files_gone_from_storage_rebootstrap_with_a_warning(
    site: Site, cli: Callable[..., CliResult], status: Literal[404, 410]
) -> None:
    expect = _merge_and_append(site)
    assert _sync(site, cli).code == 0
    for offset, table in enumerate(expect):
        site.commit(table, 3, seed=10 + offset)  # updates and deletes: change-data files
    faults = site.server.faults
    faults.gone_files, faults.gone_status = ("_change_data/",), status

    result = _sync(site, cli)

    assert result.code == 0, result.out + result.err
    assert faults.faulted > 0, "no download was refused: the test proves nothing"
    assert result.out.count(GAP) == 2, result.out
    _assert_rebootstrapped(
        site,
        cli,
        expect,
        before=0,
        cause=f"HTTP {status}: a change file of versions 1..3 is gone from the provider's storage",
    )


def test_urls_of_vacuumed_files_from_an_unchecking_server_rebootstrap(
    site: Site, cli: Callable[..., CliResult]
) -> None:
    expect = _merge_and_append(site)
    assert _sync(site, cli).code == 0
    for offset, table in enumerate(expect):
        site.commit(table, 2, seed=20 + offset)
        site.append(table, 1, seed=25 + offset)  # a version described by its add file alone ...
        path = str(site.path(table))
        DeltaTable(path).update(updates={"tiny": "coalesce(tiny, 0) / 2"})  # ... which this rewrites away
        DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    site.server.faults.unchecked_presign = True  # as the reference server: URLs of files that are gone

    result = _sync(site, cli)

    assert result.code == 0, result.out + result.err
    _assert_rebootstrapped(site, cli, expect, before=0, cause="is gone from the provider's storage")


@pytest.mark.parametrize("kind", sorted(HISTORY_ERRORS))
def test_the_reference_servers_history_errors_rebootstrap(site: Site, cli: Callable[..., CliResult], kind: str) -> None:
    expect = _merge_and_append(site)
    assert _sync(site, cli).code == 0
    for offset, table in enumerate(expect):
        site.commit(table, 2, seed=30 + offset)
    faults = site.server.faults
    faults.history_error, faults.budget = cast(HistoryError, kind), 2  # the first /changes of each table

    result = _sync(site, cli)

    assert result.code == 0, result.out + result.err
    assert faults.budget == 0
    _assert_rebootstrapped(site, cli, expect, before=0, cause=HISTORY_ERRORS[kind][1])


def test_a_snapshot_file_gone_after_listing_is_listed_again(site: Site, cli: Callable[..., CliResult]) -> None:
    site.table("m", rows=30)
    site.config(site.spec("m"))
    faults = site.server.faults
    faults.gone_files, faults.budget = ("part-",), 1  # the first download of the bootstrap: 404

    result = _sync(site, cli)

    assert result.code == 0, result.out + result.err
    assert faults.budget == 0
    assert_at_checkpoint(site, Expectation("m", "merge"))


def test_a_snapshot_file_gone_twice_is_a_clear_transient_error(site: Site, cli: Callable[..., CliResult]) -> None:
    site.table("m", rows=30)
    site.config(site.spec("m"))
    site.server.faults.gone_files = ("part-",)

    result = _sync(site, cli)

    assert result.code == 1, result.out + result.err
    [line] = [x for x in result.err.splitlines() if x.startswith("error:")]
    assert "the provider's snapshot at version 0 lists files its storage no longer has, twice (HTTP 404" in line
    assert site.checkpoint("m") is None and not (site.root / "warehouse" / "m").exists()
    assert site.staged_files() == 0
