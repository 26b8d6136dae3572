"""Fixtures for the engine jobs: a real engine session, and batch staging.

Every test that takes ``spark`` runs on both engines — the embedded Sail and Apache Spark 4.2 +
Delta 4.4 (``tests/conftest.py``'s ``engine``) — writes real Delta tables through it and checks
them with ``deltalake``, an independent reader. The Spark cases are in the slow lane.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from support.engines import BOTH
from support.jobs import SCHEMA, StageFn, write_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    direct = Path(metafunc.definition.path).parent == Path(__file__).parent
    parametrized = any("engine" in marker.args[0] for marker in metafunc.definition.iter_markers("parametrize"))
    if direct and "spark" in metafunc.fixturenames and not parametrized:
        metafunc.parametrize("engine", BOTH, indirect=True)


@pytest.fixture(scope="session", autouse=True)
def _engine_session() -> Iterator[None]:
    """Stop the shared embedded engine once the job tests are done."""
    yield
    from support.spark import stop_spark

    stop_spark()


@pytest.fixture
def spark(engine_spark: dict[str, Any]) -> SparkSession:
    from support.spark import get_spark

    from sharesync.sync.core.config import SparkConfig

    return get_spark(SparkConfig(**engine_spark))


@pytest.fixture
def stage(tmp_path: Path) -> StageFn:
    """``stage(rows, schema=SCHEMA, files=1)`` -> a fresh staged batch directory."""
    counter = iter(range(1_000))

    def make(rows: Sequence[dict[str, Any]], schema: pa.Schema = SCHEMA, files: int = 1) -> Path:
        return write_batch(tmp_path / f"batch-{next(counter)}", rows, schema, files)

    return make


@pytest.fixture
def target(tmp_path: Path) -> str:
    return str(tmp_path / "target")
