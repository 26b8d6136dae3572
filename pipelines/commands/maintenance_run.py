"""``sharesync optimize`` and ``sharesync vacuum``: each table's target, under its lease.

A table's maintenance takes the table's sync lease first (a sync holding it: refused at once,
:class:`~sharesync.sync.core.errors.LeaseHeld`), and writes under a fence of that holding, as a
sync's batches do: it never races a sync, and a holder that lost the lease meanwhile is told so.
One table's failure is its own result; the others still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.compaction import compact_for
from sharesync.pipelines.targets.delta.fencing import Fence, fencing
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.health import Thresholds, compaction_reason
from sharesync.sync.core.errors import ConfigError, SharesyncError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from sharesync.pipelines.run.sync_pass import Syncer
    from sharesync.sync.core.config import TableConfig
    from sharesync.sync.core.location import Location

__all__ = ["Maintained", "optimize_tables", "vacuum_tables"]


@dataclass(frozen=True)
class Maintained:
    """What maintenance did to one table (``ok`` False: it failed, ``line`` says why)."""

    name: str
    line: str
    ok: bool = True


def optimize_tables(
    syncer: Syncer, names: Iterable[str], *, force: bool, merge_on_read: bool = False
) -> list[Maintained]:
    """Compact the targets past a threshold of their ``maintenance`` settings (``force``: every
    one); ``merge_on_read`` first turns the deletion vectors of copy-on-write targets on (an
    explicit step: some readers cannot read them)."""

    def one(table: TableConfig, target: Location) -> str:
        thresholds = Thresholds.of(syncer.config.maintenance(table))
        health = DELTA.health(target, thresholds)
        if health is None:
            return "no target table yet: nothing to compact"
        converted = ""
        if merge_on_read:
            if not syncer.config.deletion_vectors(table):
                raise ConfigError(
                    f"the config sets 'deletion_vectors: false' for {table.key}; remove that to make its target "
                    "merge-on-read, or leave out --merge-on-read"
                )
            if DELTA.merge_on_read(syncer.resources.spark(), target):
                converted = "deletion vectors turned on (merge-on-read from the next batch); "
        reason = compaction_reason(health, thresholds)
        if reason is None and not force:
            return f"{converted}healthy, left as it is: {health.describe()}"
        return converted + compact_for(syncer.resources.spark(), target, thresholds, reason or "forced")

    return _each(syncer, names, one)


def vacuum_tables(syncer: Syncer, names: Iterable[str], *, retain_hours: int) -> list[Maintained]:
    """Remove the files no version of the last ``retain_hours`` needs."""

    def one(table: TableConfig, target: Location) -> str:
        if DELTA.health(target, Thresholds()) is None:
            return "no target table yet: nothing to vacuum"
        done = DELTA.vacuum(syncer.resources.spark(), target, retain_hours=retain_hours)
        removed = "some files" if done.files is None else f"{done.files} files"
        return f"vacuumed with {done.how}: removed {removed} older than {retain_hours} h that no version needs"

    return _each(syncer, names, one)


def _each(syncer: Syncer, names: Iterable[str], work: Callable[[TableConfig, Location], str]) -> list[Maintained]:
    chosen = list(names)
    tables = [syncer.table(n) for n in chosen] if chosen else list(syncer.config.tables)
    return [_under_lease(syncer, table, work) for table in tables]


def _under_lease(syncer: Syncer, table: TableConfig, work: Callable[[TableConfig, Location], str]) -> Maintained:
    target = syncer.resources.locate(table.target)
    try:
        with syncer.resources.store.hold_lease(table.key, ttl=syncer.lease_ttl) as keeper:
            with fencing(Fence(table.key, target, keeper.lease.acquired_at)):
                line = work(table, target)
            keeper.check()
    except SharesyncError as exc:
        return Maintained(table.key, str(exc), ok=False)
    return Maintained(table.key, line)
