"""A checkpoint missing or behind its target: resume from what the target itself records.

The target's Delta log records each batch it applied (:mod:`sharesync.pipelines.targets.delta.commit_record`).
When the state store lost a table's checkpoint (a deleted SQLite file) or holds an older one (a
PostgreSQL restored from an old backup), the checkpoint is rebuilt from that record before
anything is planned: no snapshot downloaded again, no batch applied twice, an append target's
change log kept. A pass does it by itself (:class:`~sharesync.pipelines.run.table_run.TableRun`),
``sharesync db recover`` for every configured table at once. The decision is
:func:`~sharesync.sync.planning.run_plan.resume_version` (pure); this module reads and writes.
A checkpoint *ahead* of its target is not touched here: the identity check answers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.pipelines.modes.base import ModeStrategy
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import Glance
from sharesync.state import Checkpoint, Lease, StateStore
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.location import Location
from sharesync.sync.core.storage import StorageSection
from sharesync.sync.planning.run_plan import ROWS_RECORD, resume_notice, resume_version
from sharesync.sync.planning.target_judgement import written_for
from sharesync.sync.staging.batch import remove_batch, table_dir

__all__ = ["Resumed", "resume_from_target"]


@dataclass(frozen=True)
class Resumed:
    checkpoint: Checkpoint
    notice: str  # said once: the CLI, the run record, status, Dagster


def resume_from_target(
    store: StateStore,
    table: TableConfig,
    target: Location,
    checkpoint: Checkpoint | None,
    storage: StorageSection,
    staging: Location,
    strategy: ModeStrategy,
    lease: Lease | None = None,
) -> Resumed | None:
    """Move ``table``'s checkpoint up to what its target records; None when it stands.

    A missing checkpoint counts as lost only when the store knows nothing of the table (no run
    either): ``sharesync reset`` removes the checkpoint alone, to have the table bootstrapped.
    Cheap when nothing is amiss: a checkpoint whose recorded target commit is still the newest
    (:meth:`~sharesync.pipelines.targets.port.TargetFormat.glance`) is trusted without reading the log.
    ``staging``: the staging root, where a moved checkpoint's table keeps no batch; ``strategy``: the
    table's mode as the pass's registry gives it (its high-water columns).
    """
    if checkpoint is not None:
        if not written_for(checkpoint, table):
            return None  # another target or mode: the planner rebuilds it
        recorded_at = checkpoint.target_version
        if (
            recorded_at is not None
            and DELTA.glance(table.target, recorded_at, checkpoint.updated_at, storage) is Glance.SAME
        ):
            return None
    elif store.runs_for(table.key, limit=1):
        return None  # forgotten on purpose: 'sharesync reset' keeps the run history, and bootstraps
    found = DELTA.read_record(target, table.key)
    if found is None or found.record.mode != table.mode.value:
        return None
    record = found.record
    if checkpoint is not None and checkpoint.table_id != record.table_id:
        return None  # the provider re-created the table since: the record is of the old one
    high_water = DELTA.high_water_mark(target, *strategy.high_water_columns) if table.mode in ROWS_RECORD else None
    before = checkpoint.version if checkpoint is not None else None
    version = resume_version(before, record.end, table.mode, high_water)
    if version is None:
        return None
    moved = Checkpoint(
        name=table.key,
        version=version,
        table_id=record.table_id,
        schema_fingerprint=record.schema_fingerprint,
        target=table.target,
        mode=table.mode.value,
        version_timestamp=record.committed if version == record.end else None,
        target_table_id=found.target_table_id,
        target_version=found.target_version,
        target_mode=table.mode.value,
    )
    stored = store.advance_checkpoint(moved, expected_version=before, lease=lease)
    # A batch killed between its target commit and its checkpoint left its staged files; no run
    # stages it again now, so they go here (the caller holds the lease, or no sync runs).
    remove_batch(table_dir(staging, table.key))
    return Resumed(stored, resume_notice(table.target, before, version))
