"""The run's side of the target check: the glance at the target, and the refusal of a layout switch.

The comparison itself is pure and lives in :mod:`sharesync.sync.planning.target_judgement`; here
are the parts that need the target or the modes: :func:`nothing_new` glances at the target's log
(I/O), and :func:`switch_refusal` words the error in the mode's own terms (what it keeps).
"""

from __future__ import annotations

from sharesync.pipelines.modes.registry import BUILTIN_MODES
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.pipelines.targets.facts import Glance
from sharesync.state import Checkpoint
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.errors import SharesyncError, TargetError
from sharesync.sync.core.storage import StorageSection
from sharesync.sync.planning.target_judgement import written_for


def switch_refusal(checkpoint: Checkpoint, table: TableConfig) -> TargetError:
    """The error for a target the config moved out of append or history mode, or into history
    mode: nothing is written."""
    held = BUILTIN_MODES.of_mode(checkpoint.mode).keeps
    leaving = held is not None
    kept = f"its {held} would be lost" if held is not None else "it holds no history to continue"
    # Leaving a log or history drops what the provider cannot rebuild: only an explicit flag does that.
    reset = f"sharesync reset {table.key}" + (" --discard-target" if leaving else "")
    return TargetError(
        f"target {table.target} was synced in '{checkpoint.mode}' mode and the config now says "
        f"'{table.mode.value}'; sharesync will not convert it ({kept}). Run '{reset}' "
        "to rebuild it from the provider's snapshot in the new mode, or point 'target' at a new path"
    )


def is_up_to_date(
    table: TableConfig, polled: int | SharesyncError, checkpoint: Checkpoint | None, storage: StorageSection
) -> bool:
    """Whether the table has nothing to do this pass (a failed poll is not up to date: it fails)."""
    return (
        not isinstance(polled, SharesyncError)
        and checkpoint is not None
        and nothing_new(table, checkpoint, polled, storage)
    )


def nothing_new(table: TableConfig, checkpoint: Checkpoint, source_version: int, storage: StorageSection) -> bool:
    """The checkpoint is at the provider's version, for this target, and the target still ends
    with the commit it recorded (a checkpoint written before sharesync recorded its target is
    not looked at, until its next batch)."""
    if checkpoint.version != source_version or not written_for(checkpoint, table):
        return False
    if checkpoint.target_version is None:
        return True
    return DELTA.glance(table.target, checkpoint.target_version, checkpoint.updated_at, storage) is Glance.SAME
