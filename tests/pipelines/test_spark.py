"""Session management: lazy imports, one session per engine until closed, UTC, conf applied — and the
engine facts the jobs are built around, on each engine.

The session tests are about the embedded engine and run on Sail only; the facts run on
both engines and say where Apache Spark + Delta differs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support.engines import SAIL
from support.spark import get_spark

from sharesync.sync.core.config import SparkConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_importing_the_engine_modules_does_not_import_pyspark() -> None:
    code = (
        "import sys\n"
        "from sharesync.pipelines.jobs import session, staged\n"
        "from sharesync.pipelines.modes import registry\n"
        "from sharesync.pipelines.modes.append import append\n"
        "from sharesync.pipelines.modes.merge import merge, rewrite\n"
        "from sharesync.pipelines.modes.snapshot import snapshot\n"
        "from sharesync.pipelines.targets.delta import format, identity, preflight, stats, write\n"
        "heavy = [m for m in ('pyspark', 'pysail', 'deltalake') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("engine", [SAIL], indirect=True)  # the embedded engine
def test_an_engine_keeps_its_session_until_closed_and_uses_utc(spark: SparkSession) -> None:
    from sharesync.pipelines.jobs.session import SparkEngine

    engine = SparkEngine(SparkConfig(conf={"spark.sql.shuffle.partitions": "3"}))
    other = engine.session()
    assert engine.session() is other and other is not spark  # its own session, on the same embedded server
    assert other.conf.get("spark.sql.shuffle.partitions") == "3"
    engine.close()
    assert other.is_stopped and not spark.is_stopped  # one engine's end is not another's
    assert engine.session() is not other  # asked again: a new one
    engine.close()
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.sql("SELECT CAST(TIMESTAMP '2024-01-01 00:00:00' AS LONG) AS s").collect()[0]["s"] == 1704067200


@pytest.mark.parametrize("engine", [SAIL], indirect=True)  # the embedded engine
def test_concurrent_callers_share_one_new_session(spark: SparkSession) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from sharesync.pipelines.jobs.session import SparkEngine

    engine = SparkEngine(SparkConfig(conf={"spark.sql.shuffle.partitions": "5"}))
    with ThreadPoolExecutor(8) as pool:
        sessions = list(pool.map(lambda _: engine.session(), range(8)))
    assert all(s is sessions[0] for s in sessions)
    engine.close()


@pytest.mark.parametrize("engine", [SAIL], indirect=True)  # the embedded engine's session cache
def test_a_session_started_early_is_the_one_the_wait_returns(spark: SparkSession) -> None:
    import threading

    from sharesync.pipelines.jobs.session import start_early

    starters: list[str] = []

    def factory() -> SparkSession:
        starters.append(threading.current_thread().name)
        return get_spark()

    assert start_early(factory)() is spark
    assert starters == ["sharesync-engine-start"]  # started off the main thread
    assert start_early(spark)() is spark  # a session, not a factory: nothing to start


def test_an_early_start_that_fails_raises_at_the_wait() -> None:
    import pytest

    from sharesync.pipelines.jobs.session import start_early

    def broken() -> SparkSession:
        raise ConnectionRefusedError("no engine at sc://nowhere:1")

    wait = start_early(broken)
    with pytest.raises(ConnectionRefusedError, match="nowhere"):
        wait()


def test_delta_idempotent_write_options_fence_on_spark_only(spark: SparkSession, engine: str, tmp_path: Path) -> None:
    """Why a stale writer is not fenced by the write itself (docs/guarantees.md, *What is not guaranteed*).

    Delta's ``txnAppId``/``txnVersion`` make a batch written twice land once: Delta Lake on Spark
    honours them and logs a ``txn`` action; Sail writes the batch twice and logs none. The jobs
    keep to what both do, so the checkpoint's compare-and-swap stays the fence on every engine.
    """
    from deltalake import DeltaTable

    target = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(target)
    for _ in range(2):
        spark.range(3).write.format("delta").mode("append").option("txnAppId", "batch").option("txnVersion", "1").save(
            target
        )
    logged = "".join(p.read_text() for p in sorted((tmp_path / "t" / "_delta_log").glob("*.json")))
    if engine == SAIL:
        assert spark.read.format("delta").load(target).count() == 9
        assert '"txn"' not in logged and DeltaTable(target).version() == 2
    else:
        assert spark.read.format("delta").load(target).count() == 6
        assert '"txn"' in logged and DeltaTable(target).version() == 1


def test_sail_reads_a_float_column_with_flat_statistics_as_a_constant(
    spark: SparkSession, engine: str, tmp_path: Path
) -> None:
    """Why direct bootstraps stage such files and targets keep no float statistics (sync/staging/
    direct.py, pipelines/targets/delta/write.py): Sail reads NaN beside them wrong, Apache Spark right.
    If the Sail case fails, Sail reads them right too."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [float("nan"), 2.0]}), tmp_path / "f.parquet")  # statistics: min = max = 2.0
    read = [r.x for r in spark.read.parquet(str(tmp_path / "f.parquet")).collect()]
    if engine == SAIL:
        assert read == [2.0, 2.0]
    else:
        assert read[1] == 2.0 and read[0] != read[0]  # NaN


@pytest.mark.parametrize("engine", [SAIL], indirect=True)  # the embedded engine
def test_the_embedded_engine_refuses_other_storage_settings_than_it_started_with(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sail reads them from the process environment, which every engine of the process shares: other
    settings later in the process could reach a store with the wrong ones (checked on pysail 0.7.2:
    a session reads the environment when it first reaches a store), so they fail."""
    from sharesync.pipelines.jobs import session
    from sharesync.pipelines.jobs.session import SparkEngine
    from sharesync.sync.core.errors import ConfigError
    from sharesync.sync.core.storage import StorageSection

    monkeypatch.setattr(session._EMBEDDED, "_environment", {})  # as in a fresh process
    for name in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(name, raising=False)  # put back as they were afterwards

    def engine(region: str | None) -> SparkEngine:
        settings = {"s3://lake/": {"endpoint": "http://127.0.0.1:9", "allow_http": True, "region": region}}
        return SparkEngine(storage=StorageSection.model_validate(settings if region else {}))

    engines = [engine("eu-west-1"), engine("eu-west-1"), engine(None)]  # the same settings again, or none: fine
    assert all(not e.session().is_stopped for e in engines)
    with pytest.raises(ConfigError, match=r"already works with other settings \(AWS_REGION\).*spark\.remote"):
        engine("us-east-1").session()
    for each in engines:
        each.close()
