"""Definitions that follow a share: the ``include:`` patterns' tables, listed when the code location loads.

A pattern's tables are external state — the provider decides them — so the code location lists
the selected shares each time it loads (one listing per share, as a pass does) and makes an
asset of every matched table; Dagster's reload (the UI's "Reload", ``dagster dev`` on a change,
a redeploy) is how a table added at the provider becomes an asset without any code edit. A
reload rather than a state-backed component because the same code location loads from
``workspace.yaml`` as well as from a ``dg`` project, and a reload needs no state file to keep in
step with the provider: the listing at load *is* the state. The source sensor lists the shares
on each tick too and says in its log which tables are new (waiting for a reload) or removed at
the provider.

A provider that cannot be listed never stops the location from loading: its tables that have
a checkpoint stay assets, and the log says why nothing new was found.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sharesync.sync.core.config import SharesyncConfig, TableConfig
from sharesync.sync.core.errors import SharesyncError

log = logging.getLogger(__name__)


def with_selection(config: SharesyncConfig) -> SharesyncConfig:
    """``config`` with the tables its ``include:`` patterns match now (unchanged without patterns)."""
    if not config.include:
        return config
    from sharesync.pipelines.run.sync_pass import Syncer  # only configs with patterns pay for it at load

    try:
        with Syncer(config) as syncer:
            syncer.select()
            return syncer.config
    except SharesyncError as exc:  # e.g. the state store is down: the explicit tables still load
        log.warning("cannot list the tables the include: patterns select (%s); loading the explicit ones", exc)
        return config


@dataclass(frozen=True)
class SelectionNews:
    """What a sensor tick found the patterns select now, against the loaded definitions."""

    new: tuple[TableConfig, ...]  # matched now, no asset yet: a reload adds them
    removed: tuple[TableConfig, ...]  # gone from their share's listing

    def lines(self) -> list[str]:
        said = [
            f"{t.key}: new at the provider; it becomes an asset when the code location is reloaded" for t in self.new
        ]
        said += [
            f"{t.key}: removed at provider; its target and checkpoint are kept, syncing resumes if it returns"
            for t in self.removed
        ]
        return said


def selection_news(loaded: list[TableConfig], selected: list[TableConfig], removed: list[TableConfig]) -> SelectionNews:
    """Pure: tables selected now but not loaded, and loaded ones now removed at the provider."""
    known = {t.key for t in loaded}
    gone = {t.key for t in removed}
    return SelectionNews(
        tuple(t for t in selected if t.key not in known),
        tuple(t for t in loaded if t.key in gone),
    )
