"""The benchmark harness end to end on tiny data: every shape yields figures, goals and verified targets.

Not a measurement (``--scale 0.01``, one run): it keeps ``bench/`` working as the product changes,
so the real run on a quiet machine does not fail after minutes of generation.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# One shape keeps the suite's time in bounds: the shapes share one generator and differ only in
# parameters, and the phases test below runs another (narrow).
SHAPES = ("small",)
PIPELINES = ("sharesync", "peer", "limit")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def _bench(module: str, *args: str, data: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SHARESYNC_BENCH_DATA": str(data)}
    return subprocess.run(
        [sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("bench")
    return {name: base / name for name in ("data", "work", "results")}


def test_every_shape_gives_figures_goals_and_verified_targets(dirs: dict[str, Path]) -> None:
    done = _bench(
        "bench.run", "--shape", *SHAPES, "--scale", "0.01", "--runs", "1", "--phases", "--poll-tables", "5",
        "--work", str(dirs["work"]), "--results", str(dirs["results"]), data=dirs["data"],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for shape in SHAPES:
        for scenario in ("bootstrap", "incremental"):
            assert f"{shape}-{scenario}: targets verified" in done.stdout

    [result] = dirs["results"].glob("*.json")
    report = json.loads(result.read_text())
    summary = report["summary"]
    for shape in SHAPES:
        for scenario in ("bootstrap", "incremental"):
            for pipeline in PIPELINES:
                figures = summary[f"{shape}-{scenario}/{pipeline}"]
                assert figures["wall"] > 0 and figures["maxrss_mib"] > 0, (shape, scenario, pipeline)
            assert "cli.main (total)" in report["phases"][f"{shape}-{scenario}"]["phases"]
        assert summary[f"{shape}-noop/sharesync"]["n"] >= 5
    goals = report["goals"]
    assert len(goals) >= 4 * len(SHAPES)  # per shape 4, plus the goals that need M or L
    assert all(goal.startswith(("- [PASS]", "- [MISS]")) for goal in goals), goals
    assert "REDUCED SCALE" in (result.with_suffix(".md")).read_text()


def test_the_deletion_vector_shape_runs_both_pipelines_through_the_delta_format(dirs: dict[str, Path]) -> None:
    """``--shape dv``: a table Sail wrote with deletion vectors; the peer and the limit ask for the
    delta response format (the server answers nothing else for it). sharesync's target verifies;
    the peer's is reported as wrong by construction and not checked (bench/README.md)."""
    done = _bench(
        "bench.run", "--shape", "dv", "--scale", "0.01", "--runs", "1", "--scenarios", "incremental",
        "--work", str(dirs["work"] / "dv"), "--results", str(dirs["results"] / "dv"), data=dirs["data"],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "dv-incremental: sharesync's target verified; the peer's target is wrong by construction" in done.stdout
    [result] = (dirs["results"] / "dv").glob("*.json")
    report = json.loads(result.read_text())
    summary = report["summary"]
    assert any(
        f.startswith("- dv-incremental: the peer's target is wrong by construction") and "delta_kernel 0.22.0" in f
        for f in report["findings"]
    )
    assert "| dv-incremental | peer (target wrong by construction) |" in result.with_suffix(".md").read_text()
    assert all(summary[f"dv-incremental/{p}"]["wall"] > 0 for p in PIPELINES)
    assert "dv-incremental (issue 12): peak RSS vs peer" in result.with_suffix(".md").read_text()


def test_phases_breaks_down_a_shape(dirs: dict[str, Path]) -> None:
    done = _bench(
        "bench.phases", "--shape", "narrow", "--scenario", "bootstrap", "incremental", "--runs", "1",
        "--scale", "0.01", "--work", str(dirs["work"]), data=dirs["data"],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for scenario in ("bootstrap", "incremental"):
        assert f"narrow-{scenario} (narrow_10000, scale 0.01): median of 1 run(s)" in done.stdout
    assert "| SparkEngine.session (engine start on 1st call) |" in done.stdout
    assert "| stage (download+stage, wall) |" in done.stdout


def test_scale_bench_runs_both_scenarios(dirs: dict[str, Path]) -> None:
    """``bench.scale``: many tables (parallel, serial, peer loop, one table) and the engines, verified."""
    tables = _bench(
        "bench.scale", "tables", "--tables", "3", "--scale", "0.05", "--runs", "1",
        "--work", str(dirs["work"] / "tables"), "--results", str(dirs["results"]), data=dirs["data"],
    )  # fmt: skip
    assert tables.returncode == 0, tables.stdout[-4000:] + tables.stderr[-4000:]
    for pipeline in ("parallel", "serial", "peer-loop"):
        assert f"{pipeline}: all 3 targets equal the provider" in tables.stdout
    assert "peak RSS parallel / one table" in tables.stdout

    engines = _bench(
        "bench.scale", "engines", "--shape", "small", "--scale", "0.01", "--runs", "1", "--workers", "2",
        "--work", str(dirs["work"] / "engines"), "--results", str(dirs["results"]), data=dirs["data"],
    )  # fmt: skip
    assert engines.returncode == 0, engines.stdout[-4000:] + engines.stderr[-4000:]
    for variant in ("embedded", "local-cluster-2"):
        assert f"{variant}: target equals the provider" in engines.stdout
