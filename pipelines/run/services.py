"""What one table's run works with, handed to it explicitly by the resources that own them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.modes.registry import BUILTIN_MODES, ModeRegistry
from sharesync.sync.core.config import SharesyncConfig
from sharesync.sync.core.location import Location, Place, locate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from sharesync.state import StateStore
    from sharesync.sync.protocol.budget import TransferBudget
    from sharesync.sync.protocol.client import SharingClient
    from sharesync.sync.protocol.download import ProgressCallback

# (label, files to download) → a callback for the download's progress, or None for no display.
ProgressFactory = Callable[[str, int], "ProgressCallback | None"]


@dataclass(frozen=True)
class RunServices:
    """The config, state store, sharing client, Spark factory, progress display, budget and modes of one pass.

    ``spark`` is a factory (the pass's engine, tracked by the table's run), called by a job only
    when it has rows to write: a batch with nothing to apply never starts an engine.
    """

    config: SharesyncConfig
    store: StateStore
    client: SharingClient
    spark: Callable[[], SparkSession]
    progress: ProgressFactory | None = None
    budget: TransferBudget | None = None  # shared by the tables of a pass (None: no pass-wide bound)
    modes: ModeRegistry = BUILTIN_MODES  # which strategy syncs a table (pipelines/modes/registry.py)

    def locate(self, place: Place) -> Location:
        """A target or the staging directory, reached with the config's ``storage:`` settings."""
        return locate(place, self.config.storage)

    def progress_for(self, label: str, files: int) -> ProgressCallback | None:
        if self.progress is None or files == 0:
            return None
        return self.progress(label, files)
