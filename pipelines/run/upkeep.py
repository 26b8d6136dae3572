"""A sync's own target upkeep: after each batch, compact the target when its settings say so.

After every batch, not once per pass: a pass catching up on a long backlog applies hundreds of
batches, and the target's readers should not wait for its end. It runs under the pass's lease
and fence, so it never races another writer, and after the checkpoint moved: the batch is
committed whatever happens here. A failed compaction is therefore a warning — the next batch or
pass, or ``sharesync optimize``, tries again — never a failed sync.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.run.failures import describe
from sharesync.pipelines.targets.compaction import compact_after_batch
from sharesync.pipelines.targets.delta.fencing import Fence, fencing
from sharesync.pipelines.targets.health import Thresholds

if TYPE_CHECKING:
    from sharesync.pipelines.run.services import RunServices
    from sharesync.sync.core.config import TableConfig
    from sharesync.sync.core.location import Location

__all__ = ["Upkeep", "upkeep"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Upkeep:
    done: str | None = None  # what a compaction did (None: none was due, or it failed)
    warning: str | None = None


def upkeep(services: RunServices, table: TableConfig, target: Location, fence: Fence) -> Upkeep:
    """Compact ``target`` when a threshold of the table's ``maintenance`` settings is reached."""
    settings = services.config.maintenance(table)
    if settings.compact == "off":
        return Upkeep()
    try:
        with fencing(fence):
            done = compact_after_batch(services.spark, target, Thresholds.of(settings))
    except Exception as exc:  # noqa: BLE001 - the batch is committed; a failed compaction must not undo that
        warning = (
            f"the target was not compacted after the batch: {describe(exc)}; "
            "the batch is committed, and the next batch, sync or 'sharesync optimize' tries again"
        )
        log.warning("%s: %s", table.key, warning, exc_info=log.isEnabledFor(logging.DEBUG))
        return Upkeep(warning=warning)
    if done is not None:
        log.info("%s: %s", table.key, done)
    return Upkeep(done=done)
