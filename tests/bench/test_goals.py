"""The size curve's goals (issue 42) as the report states them: incremental wall and CPU against
xl-1m's of the same change pattern, per engine; rows written against keys changed; peak RSS.

``bench`` is not an installed package: its code runs from the repository root, as ``python -m bench.run`` does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_CHECK = """
import argparse, json, sys
from bench.goals import check_goals
summary, labels, engine = json.loads(sys.argv[1])
class Run:
    spark = object() if engine == "spark" else None
    args = argparse.Namespace(scenarios=["incremental"], poll_tables=0, scale=1.0)
print(json.dumps(check_goals(Run(), summary, labels)))
"""


def _goals(summary: dict[str, dict[str, float]], labels: list[str], engine: str = "sail") -> list[str]:
    done = subprocess.run([sys.executable, "-c", _CHECK, json.dumps([summary, labels, engine])], cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    goals: list[str] = json.loads(done.stdout)
    return goals


def _incremental(wall: float, rss: float, cpu: float | None = None, **writes: float) -> dict[str, float]:
    return {"wall": wall, "maxrss_mib": rss, "total_cpu": wall if cpu is None else cpu, **writes}


def test_the_xl_curve_is_judged_against_the_1m_point_of_its_pattern_and_the_memory_bound() -> None:
    summary = {
        "xl-1m-incremental/sharesync": _incremental(10.0, 500.0),
        "xl-20m-incremental/sharesync": _incremental(14.0, 1_000.0, cpu=16.0),
        "xl-50m-incremental/sharesync": _incremental(40.0, 2_100.0),
        "xl-1m-appends-incremental/sharesync": _incremental(5.0, 400.0),
        "xl-20m-appends-incremental/sharesync": _incremental(6.0, 400.0, rows_written=600_000.0),
    }
    goals = _goals(summary, ["xl-1m", "xl-20m", "xl-50m", "xl-1m-appends", "xl-20m-appends"])

    assert "- [PASS] xl-20m-incremental: wall vs xl-1m's (sharesync): 1.40× (goal ≤ 1.5×)" in goals
    assert any(g.startswith("- [MISS] xl-20m-incremental: cpu vs xl-1m's (sharesync): 1.60×") for g in goals)
    assert any(g.startswith("- [MISS] xl-50m-incremental: wall vs xl-1m's (sharesync): 4.00× (goal ≤ 2.0×") for g in goals)
    assert "- [PASS] xl-20m-appends-incremental: wall vs xl-1m-appends's (sharesync): 1.20× (goal ≤ 1.5×)" in goals
    # 10 versions × 50 k keys changed; 600 k rows written into new files
    assert "- [PASS] xl-20m-appends-incremental: rows written into new files vs keys changed: 1.20× (goal ≤ 2.0×)" in goals
    assert any(g.startswith("- [MISS] xl-50m-incremental: peak RSS (sharesync): 2100.00 MiB") for g in goals)
    assert "- [PASS] xl-1m-incremental: peak RSS (sharesync): 500.00 MiB (goal ≤ 2048 MiB)" in goals


def test_apache_spark_has_its_own_bound() -> None:
    summary = {
        "xl-1m-incremental/sharesync": _incremental(10.0, 500.0),
        "xl-20m-incremental/sharesync": _incremental(19.0, 900.0),
    }
    goals = _goals(summary, ["xl-1m", "xl-20m"], engine="spark")

    assert "- [PASS] xl-20m-incremental: wall vs xl-1m's (sharesync): 1.90× (goal ≤ 2.0×)" in goals


def test_without_the_1m_point_the_curve_is_not_judged() -> None:
    goals = _goals({"xl-50m-incremental/sharesync": _incremental(40.0, 900.0)}, ["xl-50m"])

    assert goals and "- [----] xl-50m-incremental: wall vs xl-1m's (sharesync): not measured (goal ≤ 2.0×)" in goals
