"""Every results table stays readable piped at 80 columns (issue 43 §3): numbers are never cut.

Rendered in a child process with ``COLUMNS=80`` and its output piped, as a user's ``sharesync
status | less`` is, with long table names and large numbers. Names fold onto more lines; the
optional columns that no longer fit are left out and said so (``--json`` has every field).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from rich.console import Console

from sharesync.sync.cli.fit import Col, Kind, fitted_table

LONG = "a_rather_long_share_name.with_a_long_schema_name.and_the_longest_table_name_of_all"

RESULTS = f"""
from sharesync.pipelines.modes.merge.merge_mode import MergeChanges
from sharesync.pipelines.run.results import BatchKind, BatchResult, TableOutcome, TableSyncResult
from sharesync.sync.cli.rendering import print_results
from sharesync.state import RunStats
from sharesync.sync.core.table_config import Mode

changes = MergeChanges(inserted=12345678, updated=2345678, deleted=345678)
batch = BatchResult(kind=BatchKind.CHANGES, start_version=1234567890, end_version=1234567899,
                    stats=RunStats(files_downloaded=987654, bytes_downloaded=123456789012), changes=changes,
                    seconds=4321.5)
print_results([
    TableSyncResult("{LONG}", Mode.MERGE, TableOutcome.SYNCED, 1234567899, 1234567899, (batch,), seconds=4321.5),
    TableSyncResult("s.s.gone", Mode.APPEND, TableOutcome.REMOVED, 7, None),
])
"""

STATUS = f"""
from datetime import UTC, datetime
from sharesync.pipelines.commands.status import TableStatus
from sharesync.sync.cli.rendering import print_statuses
from sharesync.state import RunStatus
from sharesync.sync.core.table_config import Mode

when = datetime(2026, 11, 28, 7, 30, tzinfo=UTC)
rows = [
    TableStatus("{LONG}", "/t", Mode.MERGE, 1234567890, 9234567890, 8000000000, when, RunStatus.SUCCEEDED,
                None, None, provider_name="a_provider_with_a_long_name"),
    TableStatus("p.s.nk", "/u", None, None, None, None, None, None, None, None, needs_keys=True,
                missing_keys=("id",), note="needs keys: add them", provider_name="other"),
]
print_statuses(rows, [])
"""


def _piped_at_80(script: str) -> str:
    env = {"COLUMNS": "80", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout


def _table_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if not line.startswith(("warning:", "note:", "provider "))]


def _column(out: str, header: str, following: str) -> str:
    """The text of one column's first row, its folded pieces joined (read down the column)."""
    lines = out.splitlines()
    head = next(n for n, line in enumerate(lines) if header in line.split() and following in line)
    start, end = lines[head].index(f" {header} ") + 1, lines[head].index(f" {following}")
    pieces = []
    for line in lines[head + 2 :]:
        piece, beside = line[start:end].strip(), line[end : end + len(following) + 1].strip()
        if not piece or (pieces and beside):  # the table ends, or the next row starts
            break
        pieces.append(piece)
    return "".join(pieces)


@pytest.mark.parametrize(
    ("script", "numbers", "columns"),
    [
        (RESULTS, ["1234567890..1234567899", "+12345678", "~2345678", "-345678 keys"], ("table", "result")),
        (STATUS, ["1234567890/9234567890", "8000000000", "-/needs keys"], ("table", "mode")),
    ],
    ids=["results", "status"],
)
def test_piped_at_80_columns_numbers_are_whole(script: str, numbers: list[str], columns: tuple[str, str]) -> None:
    out = _piped_at_80(script)
    assert max(len(line) for line in _table_lines(out)) <= 80, out
    for number in numbers:
        assert number in out, (number, out)
    assert _column(out, *columns) == LONG, out  # folded onto more lines, never cut


def test_results_leave_out_the_optional_columns_last_first_and_say_so() -> None:
    out = _piped_at_80(RESULTS)
    assert "(files, MB, s left out at this width; --json has every field)" in out
    assert "987654" not in out  # files: left out rather than cut


def test_a_wide_terminal_shows_every_column_and_whole_names() -> None:
    cols = [Col("table"), Col("versions", Kind.NUMBER), Col("files", Kind.NUMBER, optional=True)]
    console = Console(width=200, record=True)
    console.print(fitted_table(cols, [[LONG, "1..2", "987654"]], console.width))
    out = console.export_text()
    assert LONG in out and "987654" in out and "left out" not in out
