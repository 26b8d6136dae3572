"""The size curve's goals (issue 34) as the report states them: incremental wall against xl-1m's, peak RSS.

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
class Run:
    spark = None
    args = argparse.Namespace(scenarios=["incremental"], poll_tables=0)
summary, labels = json.loads(sys.argv[1])
print(json.dumps(check_goals(Run(), summary, labels)))
"""


def _goals(summary: dict[str, dict[str, float]], labels: list[str]) -> list[str]:
    done = subprocess.run([sys.executable, "-c", _CHECK, json.dumps([summary, labels])], cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    goals: list[str] = json.loads(done.stdout)
    return goals


def _incremental(wall: float, rss: float) -> dict[str, float]:
    return {"wall": wall, "maxrss_mib": rss}


def test_the_xl_curve_is_judged_against_the_1m_point_and_the_memory_bound() -> None:
    summary = {
        "xl-1m-incremental/sharesync": _incremental(10.0, 500.0),
        "xl-20m-incremental/sharesync": _incremental(19.0, 1_000.0),
        "xl-50m-incremental/sharesync": _incremental(40.0, 2_100.0),
    }
    goals = _goals(summary, ["xl-1m", "xl-20m", "xl-50m"])

    assert "- [PASS] xl-20m-incremental: wall vs xl-1m's (sharesync): 1.90× (goal ≤ 2.0×)" in goals
    assert any(g.startswith("- [MISS] xl-50m-incremental: wall vs xl-1m's (sharesync): 4.00×") for g in goals)
    assert any(g.startswith("- [MISS] xl-50m-incremental: peak RSS (sharesync): 2100.00 MiB") for g in goals)
    assert "- [PASS] xl-1m-incremental: peak RSS (sharesync): 500.00 MiB (goal ≤ 2048 MiB)" in goals


def test_without_the_1m_point_the_curve_is_not_judged() -> None:
    goals = _goals({"xl-50m-incremental/sharesync": _incremental(40.0, 900.0)}, ["xl-50m"])

    assert goals and not any("wall vs xl-1m's" in g for g in goals)
