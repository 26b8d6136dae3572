"""Delta tables written by another writer: the embedded Sail engine (started once per test session).

* ``dv_table``: two data files with deletion vectors enabled, then two ``DELETE`` commits, so the
  log holds DVs written by Sail (storage type ``u``) and one file whose DV is replaced.
* ``cm_table``: ``delta.columnMapping.mode=name`` with a nested struct, a column name with a space
  and a partition column, in two commits: physical names ``col-<uuid>`` in files, stats and paths.

Both are read-only for tests; the log helpers return the actions as Delta wrote them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The DELETE commits of dv_table (versions 2 and 3): SQL for Sail, the same predicate in Python.
DV_DELETES: dict[int, tuple[str, Callable[[int], bool]]] = {
    2: ("id % 7 = 3", lambda i: i % 7 == 3),
    3: ("id BETWEEN 500 AND 520 OR id = 1200", lambda i: 500 <= i <= 520 or i == 1200),
}


@dataclass(frozen=True)
class LoggedTable:
    path: Path

    def actions(self, version: int) -> list[dict[str, Any]]:
        log = self.path / "_delta_log" / f"{version:020d}.json"
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    def adds(self, version: int) -> list[dict[str, Any]]:
        return [a["add"] for a in self.actions(version) if "add" in a]

    def removes(self, version: int) -> list[dict[str, Any]]:
        return [a["remove"] for a in self.actions(version) if "remove" in a]

    def metadata(self) -> dict[str, Any]:
        return next(a["metaData"] for a in self.actions(0) if "metaData" in a)

    def protocol(self) -> dict[str, Any]:
        return next(a["protocol"] for a in self.actions(0) if "protocol" in a)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    from support.spark import get_spark, stop_spark

    yield get_spark()
    stop_spark()


@pytest.fixture(scope="session")
def dv_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LoggedTable:
    path = tmp_path_factory.mktemp("dv") / "table"
    for start, stop, mode in ((0, 1000, "error"), (1000, 1500, "append")):
        (
            spark.range(start, stop)
            .selectExpr("id", "concat('row-', cast(id as string)) as s")
            .coalesce(1)
            .write.format("delta")
            .option("delta.enableDeletionVectors", "true")
            .mode(mode)
            .save(str(path))
        )
    for sql, _ in DV_DELETES.values():
        spark.sql(f"DELETE FROM delta.`{path}` WHERE {sql}")
    return LoggedTable(path)


@pytest.fixture(scope="session")
def dv_deletes() -> dict[int, Callable[[int], bool]]:
    """Version -> which ids that version's DELETE removed."""
    return {version: predicate for version, (_, predicate) in DV_DELETES.items()}


@pytest.fixture(scope="session")
def cm_table(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> LoggedTable:
    path = tmp_path_factory.mktemp("cm") / "table"
    for start, stop, mode in ((0, 10, "error"), (10, 16, "append")):
        (
            spark.range(start, stop)
            .selectExpr(
                "id",
                "concat('v', cast(id as string)) as `my col`",
                "named_struct('a', id * 10, 'b', cast(id as string)) as st",
                "id % 2 as part",
            )
            .write.format("delta")
            .option("delta.columnMapping.mode", "name")
            .partitionBy("part")
            .mode(mode)
            .save(str(path))
        )
    return LoggedTable(path)
