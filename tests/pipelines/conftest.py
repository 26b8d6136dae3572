"""Fixtures for the engine jobs: one real Sail session per test session, and batch staging.

Every test writes real Delta tables through the embedded Sail engine and checks them with
``deltalake``, an independent reader.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from support.jobs import SCHEMA, StageFn, write_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from sharesync.pipelines.jobs.session import get_spark, stop_spark

    yield get_spark()
    stop_spark()


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
