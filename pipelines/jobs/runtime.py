"""What one config runs with: its Spark engine, its storage settings and the access to its targets.

One object with an explicit lifetime instead of process-wide settings: a pass (the CLI's
``sync``, or a ``sync --every`` process across its passes; a Dagster run) builds it from the
config, hands it down (:class:`~sharesync.pipelines.run.services.RunServices`) and closes it at the
end. Every target read (:func:`~sharesync.pipelines.targets.delta.open.open_target`), staged batch
and probe is located through :meth:`Runtime.locate`, with this config's ``storage:`` settings, so
several configs with different settings work side by side in one process.

The Spark session lives as long as the runtime. The one limit left is the embedded engine's: Sail reads object-store settings from the process
environment (:mod:`sharesync.pipelines.jobs.session` says how, and refuses a second, different set).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.session import SparkEngine
from sharesync.sync.core.config import SparkConfig
from sharesync.sync.core.location import Location, Place, locate
from sharesync.sync.core.storage import StorageSection

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Runtime"]


class Runtime:
    """The engine, the storage settings and the target access of one config, until :meth:`close`.

    ``session``: a factory to use instead of the config's engine (tests, a caller's own session).
    """

    def __init__(
        self,
        spark: SparkConfig | None = None,
        storage: StorageSection | None = None,
        *,
        session: Callable[[], SparkSession] | None = None,
    ) -> None:
        self.spark_config = spark or SparkConfig()
        self.storage = storage or StorageSection()
        if self.spark_config.remote is None and session is None:
            self.storage.engine_environment()  # one set for the embedded engine: a config that cannot work fails now
        self._session = session
        self.engine = SparkEngine(self.spark_config, self.storage)

    def locate(self, place: Place) -> Location:
        """``place`` (a target, the staging directory) as every client reaches it with these settings."""
        return locate(place, self.storage)

    def spark(self) -> SparkSession:
        """The engine's session, started on first use."""
        return self._session() if self._session is not None else self.engine.session()

    def drop_spark(self, dead: SparkSession | None) -> None:
        """Stop the session that died (and the embedded engine): the next job starts new ones.

        Only while ``dead`` is still the current session: tables running in parallel all see it
        die, and the first to stop it must not have a later one stop the one another table started.
        """
        self.engine.drop(dead)

    def close(self) -> None:
        """End the engine's session (the embedded server stays for the process: see session.py)."""
        self.engine.close()
