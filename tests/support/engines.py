"""The engines a test can run its jobs on, for ``pytest.mark.parametrize("engine", …, indirect=True)``.

``sail`` is the embedded default; the others are Spark Connect servers the test session starts
once (fixtures in ``tests/conftest.py``). Every engine-facing module runs on ``BOTH``; the
two-worker clusters of each engine run the random rounds (``tests/e2e/test_rounds.py``), and the
Spark cluster a history-mode run (``tests/e2e/test_history_mode.py``, the untracked/tracked changes case).
"""

from __future__ import annotations

import pytest

SAIL, SPARK, SPARK_CLUSTER, SAIL_CLUSTER = "sail", "spark", "spark-cluster", "sail-cluster"
BOTH = (SAIL, SPARK)
ALL = (SAIL, SPARK, SAIL_CLUSTER, SPARK_CLUSTER)

# The session fixture that starts each remote engine.
ENGINE_FIXTURE_NAMES = {SPARK: "apache_spark", SPARK_CLUSTER: "apache_spark_cluster", SAIL_CLUSTER: "sail_cluster"}

on_both_engines = pytest.mark.parametrize("engine", BOTH, indirect=True)


def engine_param(request: pytest.FixtureRequest) -> str:
    engine = str(getattr(request, "param", SAIL))
    if engine not in ALL:
        raise ValueError(f"unknown engine {engine!r}: one of {', '.join(ALL)}")
    return engine
