"""Spark sessions for tests: one :class:`SparkEngine` per engine config, kept for the test session.

sharesync gives every config's runtime its own engine; tests that drive jobs directly share one
per config here instead of starting a session per call. :func:`stop_spark` closes them and stops
the embedded server (between test modules that need a fresh engine, and at the end).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.session import SparkEngine, stop_embedded_engine
from sharesync.sync.core.config import SparkConfig
from sharesync.sync.core.storage import StorageSection

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_engines: dict[str, SparkEngine] = {}


def get_spark(config: SparkConfig | None = None, storage: StorageSection | None = None) -> SparkSession:
    """The session of the test engine for ``config`` and ``storage`` (made on first use)."""
    config, storage = config or SparkConfig(), storage or StorageSection()
    key = config.model_dump_json() + storage.model_dump_json()
    engine = _engines.setdefault(key, SparkEngine(config, storage))
    return engine.session()


def stop_spark() -> None:
    """Close every test engine's session and stop the embedded server."""
    engines = list(_engines.values())
    _engines.clear()
    for engine in engines:
        engine.close()
    stop_embedded_engine()
