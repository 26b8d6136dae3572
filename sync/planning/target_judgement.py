"""Is the target still the table its checkpoint was written for? The comparison, pure (no I/O).

A checkpoint says "source version N is applied" — to one Delta table, in one state: the table id
and target version recorded with it. Before a batch is applied the target is compared with that
record (:func:`judge`), and each finding has one answer:

* intact — the recorded table at the recorded version, or newer by commits that left its rows
  (sharesync's own in the crash window before a checkpoint write, a compaction): go on;
* lost — no table there: rebuild it from the provider's snapshot, with a warning;
* replaced — another table sharesync wrote (it has sharesync's columns): rebuild, with a warning;
* foreign — a table sharesync did not write: refuse, never overwrite it;
* rolled back — the recorded table at an older state (a RESTORE, a restored backup, an older
  ``_delta_log`` copied back): replay the changes from the target's own high-water mark, or
  rebuild in snapshot mode (or when the provider no longer has that history), with a warning;
* unrecorded — a checkpoint written before sharesync recorded the target: as before, until its
  next batch records it.

A target the config moves out of append or history mode, or into history mode, is refused
(:func:`switches_layout`, the rule is :func:`~sharesync.sync.planning.kept_target.switch_refused`;
the error is the run's :func:`~sharesync.pipelines.run.target_check.switch_refusal`):
the table would be rewritten in another layout — its change log or history lost, or a history
begun on rows that never had one. ``sharesync reset`` is the deliberate way to do that (out of
append or history mode, ``--discard-target`` too: what only the log or history holds goes with it).

What a pass does about each finding is decided in :mod:`sharesync.sync.planning.run_plan`.

The target is described by the run (its format's :class:`~sharesync.pipelines.targets.facts.TargetIdentity`);
this layer sees it through :class:`Identity`, the facts the comparison reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sharesync.state import Checkpoint
from sharesync.sync.core.config import Mode, TableConfig
from sharesync.sync.planning.kept_target import switch_refused
from sharesync.sync.planning.run_plan import Finding, TargetFact


class Identity(Protocol):
    """What the comparison reads of the table at a target (the run passes its format's ``TargetIdentity``)."""

    @property
    def table_id(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def restored_to(self) -> int | None: ...
    @property
    def written_by_sharesync(self) -> bool: ...


@dataclass(frozen=True)
class TargetCheck:
    """The target compared with the identity its checkpoint recorded."""

    finding: Finding
    target: str
    recorded_id: str | None
    recorded_version: int | None
    current: Identity | None

    def describe(self) -> str:
        """One sentence for ``sharesync verify`` and the logs."""
        current, target = self.current, self.target
        match self.finding:
            case Finding.INTACT if current is not None:
                return f"target {target} is the table the checkpoint describes (table id {current.table_id}, version {current.version})"
            case Finding.UNRECORDED:
                return f"the checkpoint predates target identities; the next batch records the one of {target}"
            case Finding.LOST:
                return f"target {target} is gone (no Delta table there)"
            case Finding.REPLACED if current is not None:
                return (
                    f"target {target} was replaced by another Delta table written by sharesync "
                    f"(table id {self.recorded_id} → {current.table_id})"
                )
            case Finding.FOREIGN if current is not None:
                return (
                    f"target {target} is now a Delta table that sharesync did not write (table id "
                    f"{current.table_id}; the checkpoint was written for table id {self.recorded_id})"
                )
            case Finding.ROLLED_BACK if current is not None:
                return f"target {target} was rolled back to an older state ({self._how()})"
        raise AssertionError(self)  # pragma: no cover

    def fact(self, high_water: int | None = None) -> TargetFact:
        """The finding as the run's planning sees it (:func:`~sharesync.sync.planning.run_plan.prepare_run`)."""
        return TargetFact(self.finding, self.target, self.describe(), high_water)

    def _how(self) -> str:
        assert self.current is not None
        restored = self.current.restored_to
        if restored is not None and self.current.version >= (self.recorded_version or 0):
            to = f"version {restored}" if restored >= 0 else "an older timestamp"
            return f"RESTORE to {to} after the recorded version {self.recorded_version}"
        return f"version {self.current.version} is below the recorded {self.recorded_version}"


def judge(checkpoint: Checkpoint, current: Identity | None) -> TargetCheck:
    """Compare the target (``current``; None: no table) with what ``checkpoint`` recorded."""
    recorded_id, recorded_version = checkpoint.target_table_id, checkpoint.target_version

    def found(finding: Finding) -> TargetCheck:
        return TargetCheck(finding, checkpoint.target, recorded_id, recorded_version, current)

    if recorded_id is None or recorded_version is None:
        return found(Finding.UNRECORDED)
    if current is None:
        return found(Finding.LOST)
    if current.table_id != recorded_id:
        return found(Finding.REPLACED if current.written_by_sharesync else Finding.FOREIGN)
    if current.version < recorded_version:
        return found(Finding.ROLLED_BACK)
    if current.restored_to is not None and current.restored_to < recorded_version:
        return found(Finding.ROLLED_BACK)
    return found(Finding.INTACT)


def written_for(checkpoint: Checkpoint, table: TableConfig) -> bool:
    """Whether the checkpoint describes the target and mode the config names now. When not, the
    next sync rebuilds the target (``BootstrapReason.TARGET_CHANGED``) — the one rule the engine's
    no-op check, ``verify`` and the Dagster sensor all decide by."""
    return checkpoint.target == table.target and checkpoint.mode == table.mode.value


def switches_layout(checkpoint: Checkpoint, table: TableConfig) -> bool:
    """Whether the config moved the checkpoint's target in a way it may not (:func:`switch_refused`)."""
    return checkpoint.target == table.target and switch_refused(Mode(checkpoint.mode), table.mode)
