"""The results table of a pass with many tables: the quiet ones are counted, the others listed."""

from __future__ import annotations

import pytest
from rich.console import Console

from sharesync.pipelines.run.results import TableOutcome, TableSyncResult
from sharesync.sync.cli.rendering import QUIET_ROWS_SHOWN, print_results
from sharesync.sync.core.table_config import Mode


def _result(name: str, outcome: TableOutcome, warnings: tuple[str, ...] = ()) -> TableSyncResult:
    return TableSyncResult(name, Mode.MERGE, outcome, checkpoint_version=3, source_version=3, warnings=warnings)


def _printed(results: list[TableSyncResult]) -> str:
    console = Console(record=True, width=100)
    print_results(results, console=console)
    return console.export_text()


def test_a_few_quiet_tables_are_listed_one_by_one() -> None:
    out = _printed([_result(f"s.b.t{i}", TableOutcome.UP_TO_DATE) for i in range(QUIET_ROWS_SHOWN)])
    assert all(f"s.b.t{i} " in out for i in range(QUIET_ROWS_SHOWN)) and "tables up to date" not in out


@pytest.mark.parametrize("quiet", [QUIET_ROWS_SHOWN + 1, 1000])
def test_many_quiet_tables_are_counted_and_the_others_listed(quiet: int) -> None:
    results = [_result(f"s.b.quiet{i}", TableOutcome.UP_TO_DATE) for i in range(quiet)]
    results += [_result("s.b.failed", TableOutcome.FAILED), _result("s.b.warned", TableOutcome.UP_TO_DATE, ("w!",))]
    out = _printed(results)
    assert "quiet" not in out
    assert "s.b.failed" in out and "FAILED" in out and "s.b.warned" in out and "warning: s.b.warned: w!" in out
    assert f"{quiet} tables up to date ('sharesync status' lists every table)" in out


def test_a_pass_where_nothing_changed_prints_only_the_count() -> None:
    out = _printed([_result(f"s.b.t{i}", TableOutcome.UP_TO_DATE) for i in range(50)])
    assert out.strip() == "50 tables up to date ('sharesync status' lists every table)"
