"""The engines a test can run its jobs on, for ``pytest.mark.parametrize("engine", …, indirect=True)``.

``sail`` is the embedded default; the others are Spark Connect servers the test session starts
once (fixtures in ``tests/conftest.py``). Every engine-facing module runs on ``BOTH`` (where a test's
other dimension is the client's alone, ``engine_cases`` runs a chosen few of its cases on Spark); the
two-worker clusters of each engine run the random rounds (``tests/e2e/test_rounds.py``), and the
Spark cluster a history-mode run (``tests/e2e/test_history_mode.py``, the untracked/tracked changes case).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import pytest

SAIL, SPARK, SPARK_CLUSTER, SAIL_CLUSTER = "sail", "spark", "spark-cluster", "sail-cluster"
BOTH = (SAIL, SPARK)
ALL = (SAIL, SPARK, SAIL_CLUSTER, SPARK_CLUSTER)

# The session fixture that starts each remote engine.
ENGINE_FIXTURE_NAMES = {SPARK: "apache_spark", SPARK_CLUSTER: "apache_spark_cluster", SAIL_CLUSTER: "sail_cluster"}

on_both_engines = pytest.mark.parametrize("engine", BOTH, indirect=True)


def engine_cases(
    names: Sequence[str], cases: dict[str, Sequence[Any]], *, on_spark: Collection[str]
) -> pytest.MarkDecorator:
    """Every case (``id -> argument values``) on Sail; on Apache Spark only the ids ``on_spark`` names.

    For a dimension the engine takes no part in (which state store, which kind of damage the pure
    planning judges): one or two cases prove the Spark write path, and the rest would repeat Sail's
    minutes of JVM work for no new line of engine code."""
    unknown = set(on_spark) - set(cases)
    if unknown:
        raise ValueError(f"on_spark names unknown cases: {sorted(unknown)}")
    params = [pytest.param(SAIL, *values, id=f"{case}-{SAIL}") for case, values in cases.items()]
    params += [pytest.param(SPARK, *values, id=f"{case}-{SPARK}") for case, values in cases.items() if case in on_spark]
    return pytest.mark.parametrize(["engine", *names], params, indirect=["engine"])


def engine_param(request: pytest.FixtureRequest) -> str:
    engine = str(getattr(request, "param", SAIL))
    if engine not in ALL:
        raise ValueError(f"unknown engine {engine!r}: one of {', '.join(ALL)}")
    return engine
