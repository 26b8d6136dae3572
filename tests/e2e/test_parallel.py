"""One pass over many tables at once (``sharesync sync --parallel N``), through the real CLI.

The parallel pass writes the same targets as a pass one table at a time; one table's failure
leaves the others synced; the results print in config order whatever order the tables finish
in; and the pass's downloads stay within ``max_concurrent_downloads`` however many tables run —
counted where they arrive, by the sharing server.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.cli_runner import CliResult
from support.e2e import Workspace
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
    target_rows,
)

from sharesync.state import open_store

MODES = {"m1": "merge", "a1": "append", "s1": "snapshot", "m2": "merge", "a2": "append", "m3": "merge"}


def _write_config(workspace: Workspace, label: str, tables: dict[str, str], **defaults: Any) -> str:
    """``<label>.yaml``: the tables with targets, state and staging of their own under ``<label>/``."""
    specs = [{**workspace.spec(t, mode), "target": f"{label}/{t}"} for t, mode in tables.items()]
    raw = workspace.raw_config(*specs, state_store=f"sqlite:///{label}/state.db", staging_dir=f"{label}/staging")
    if defaults:
        raw["defaults"] = defaults
    path = workspace.root / f"{label}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return str(path)


def _target(workspace: Workspace, label: str, table: str) -> Path:
    return workspace.root / label / table


def _assert_matches_source(workspace: Workspace, label: str, table: str, mode: str) -> None:
    source, target = workspace.path(table), _target(workspace, label, table)
    version = source_version(source)
    if mode == "merge":
        assert_merge_target_matches(source, target, ["id"], version)
    elif mode == "append":  # bootstrapped at version 0, before any commit
        assert_append_target_matches(source, target, bootstrap_version=0, end_version=version)
    else:
        assert_snapshot_target_matches(source, target, version)


def _rows(path: Path) -> Counter[tuple[tuple[str, object], ...]]:
    return Counter(tuple(row.items()) for row in target_rows(path))


def _printed_order(out: str, names: list[str]) -> list[str]:
    """The tables in the order the results table shows them."""
    return sorted(names, key=lambda name: out.index(name))


def test_a_parallel_pass_equals_the_serial_pass(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    for seed, table in enumerate(MODES):
        workspace.table(table, rows=30, seed=seed)
    serial = _write_config(workspace, "serial", MODES)
    parallel = _write_config(workspace, "parallel", MODES)

    for round_ in range(2):
        if round_:
            for offset, table in enumerate(MODES):
                workspace.commit(table, 3, seed=10 + offset)
        one_at_a_time = cli("--config", serial, "sync", "--parallel", "1")
        assert one_at_a_time.code == 0, one_at_a_time.err
        at_once = cli("--config", parallel, "sync", "--parallel", "4")
        assert at_once.code == 0, at_once.err
        for table, mode in MODES.items():
            _assert_matches_source(workspace, "parallel", table, mode)
            serial_rows = _rows(_target(workspace, "serial", table))
            assert _rows(_target(workspace, "parallel", table)) == serial_rows, table
        names = [workspace.name(t) for t in MODES]
        assert _printed_order(at_once.out, names) == names


def test_one_failing_table_leaves_the_others_synced_and_results_keep_config_order(
    workspace: Workspace, cli: Callable[..., CliResult]
) -> None:
    tables = {"slow": "merge", "bad": "merge", "a1": "append", "s1": "snapshot", "m2": "merge"}
    for seed, table in enumerate(tables):
        workspace.table(table, rows=20, seed=seed)
    workspace.commit("slow", 6, seed=99)  # listed first, finishes last: a batch per version
    config = _write_config(workspace, "pass", tables)
    raw = yaml.safe_load(Path(config).read_text())
    raw["tables"][0]["max_versions_per_batch"] = 1
    raw["tables"][0]["start"] = {"version": 0}
    Path(config).write_text(yaml.safe_dump(raw, sort_keys=False))
    # Every file of e2e.s.bad is gone from storage (404), while the other tables download.
    workspace.server.faults.gone_files = (f"/{workspace.share}/{workspace.schema}/bad/",)

    run = cli("--config", config, "sync", "--parallel", "4")

    assert run.code == 1, run.out + run.err  # a table failed; the others ran
    assert f"{workspace.name('bad')}: " in run.err
    for table, mode in tables.items():
        if table != "bad":
            _assert_matches_source(workspace, "pass", table, mode)
    store = open_store(f"sqlite:///{workspace.root / 'pass' / 'state.db'}")
    assert store.get_checkpoint(workspace.name("bad")) is None
    names = [workspace.name(t) for t in tables]
    assert _printed_order(run.out, names) == names
    # … although the first table finished last: the order is the config's, not the finishing order.
    finished = {n: max(r.finished_at for r in store.runs_for(n) if r.finished_at) for n in names}
    assert max(finished, key=lambda n: finished[n]) == workspace.name("slow")


def test_the_download_cap_holds_for_the_whole_pass(workspace: Workspace, cli: Callable[..., CliResult]) -> None:
    tables = {f"t{i}": "snapshot" for i in range(4)}
    for seed, table in enumerate(tables):
        workspace.table(table, rows=40, seed=seed)
        workspace.commit(table, 3, seed=50 + seed)  # more files per snapshot
    faults = workspace.server.faults
    faults.download_delay_seconds = 0.2  # downloads overlap long enough to be counted

    capped = _write_config(workspace, "capped", tables, max_concurrent_downloads=3, download_concurrency=8)
    run = cli("--config", capped, "sync", "--parallel", "4")
    assert run.code == 0, run.err
    assert faults.peak_files_in_flight == 3

    faults.peak_files_in_flight = 0
    unbounded = _write_config(workspace, "unbounded", tables, max_concurrent_downloads=64, download_concurrency=8)
    run = cli("--config", unbounded, "sync", "--parallel", "4")
    assert run.code == 0, run.err
    assert faults.peak_files_in_flight > 3  # the same pass without the cap: the cap is what held it
    for table in tables:
        _assert_matches_source(workspace, "capped", table, "snapshot")


@pytest.mark.parametrize("parallel", ["2", "1"], ids=["parallel", "serial"])
def test_ctrl_c_stops_a_pass_and_the_next_pass_finishes(
    workspace: Workspace, cli: Callable[..., CliResult], parallel: str
) -> None:
    """Ctrl+C reaches the main thread (Sail's SIGINT handler does not keep it). In parallel, tables
    not started are not started and running ones end; serially, the running table stops where it
    is. Either way nothing is half-applied and no lease blocks the next pass."""
    tables = {f"t{i}": "merge" for i in range(4)}
    for seed, table in enumerate(tables):
        workspace.table(table, rows=20, seed=seed)
    config = _write_config(workspace, "pass", tables)
    faults = workspace.server.faults
    faults.download_delay_seconds = 0.3
    sharesync = Path(sys.executable).with_name("sharesync")
    process = subprocess.Popen(
        [str(sharesync), "--config", config, "sync", "--parallel", parallel],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while faults.peak_files_in_flight == 0 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise AssertionError("the pass did not stop on Ctrl+C") from None
    assert process.returncode != 0, output

    faults.download_delay_seconds = 0.0
    run = cli("--config", config, "sync")
    assert run.code == 0, run.out + run.err
    for table, mode in tables.items():
        _assert_matches_source(workspace, "pass", table, mode)
