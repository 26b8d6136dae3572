"""The one Dagster resource: where the sharesync config lives, and syncers built from it at run time.

Definitions are built from the config when the code location loads, which must stay fast
and offline; so the resource holds only the config's path. The profile, the state store,
HTTP clients and Spark are touched when an op or a sensor asks for :meth:`~SharesyncResource.syncer`
(or, to look without syncing, :meth:`~SharesyncResource.access`), inside the run (or the tick)
that needs them, and closed when it ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from sharesync.sync.core.config import SharesyncConfig, load_config

if TYPE_CHECKING:
    from sharesync.pipelines.run.pass_resources import TableAccess
    from sharesync.pipelines.run.sync_pass import Syncer

RESOURCE_KEY = "sharesync"


class SharesyncResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The sharesync config file behind every sync, check and sensor of this code location."""

    config_path: str

    def load_config(self) -> SharesyncConfig:
        """The validated config, read afresh (env overrides apply, as in the CLI)."""
        return load_config(Path(self.config_path))

    @contextmanager
    def syncer(self) -> Iterator[Syncer]:
        """A :class:`Syncer` for this run; its clients are created on first use, closed on exit."""
        # Imported here: the syncer's dependencies (SQLAlchemy, Alembic, httpx) cost at run time, not at load.
        from sharesync.pipelines.run.sync_pass import Syncer

        config = self.load_config()
        with Syncer(config) as syncer:  # lease TTL: from the config
            yield syncer

    @contextmanager
    def access(self) -> Iterator[TableAccess]:
        """The config's clients, state store and target locations, without a syncer; closed on exit."""
        from sharesync.pipelines.run.pass_resources import PassResources

        with PassResources(self.load_config()) as resources:
            yield resources
