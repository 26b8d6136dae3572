"""What a bootstrap does with an append or history target it finds at its path — pure, no I/O.

A change log (append mode) and a row history (history mode) hold what the provider cannot give
again: changes of versions it has vacuumed, rows as they were. So a bootstrap that no checkpoint
describes a target for (after ``sharesync reset``, or a state store that lost its row) never
replaces one:

* the configured mode's own layout: kept and continued, as ``on_breaking_change: rebuild``
  continues one — moved into the snapshot's schema, then the snapshot lands as ``insert`` rows at
  its version (append) or closes the open rows and opens its own there (history);
* another mode's layout, a target the config moved onto a log that its checkpoint does not
  describe, or a log that reaches past the provider's version (its table re-created): refused,
  nothing written. ``sharesync reset NAME --discard-target`` removes the target deliberately.

Their checkpoint's own target is kept the same way when the provider's table restarts its
versions (:func:`judge_restart`: re-created, or rewound): continued from the new table's snapshot
once its version passes the log's, refused until then (the two version sequences would mix). And
a checkpoint's target is never moved out of append or history mode, nor into history mode
(:func:`switch_refused`): its rows would be rewritten in another layout.

Merge and snapshot targets are rebuilt from the provider's snapshot as before.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.sync.core.config import Mode
from sharesync.sync.planning.sync_plan import FEED_ONLY, CheckpointView, SourceView, recreated, restarted


@dataclass(frozen=True)
class LeftTarget:
    """An append or history target with rows at the configured path."""

    layout: Mode  # the mode its columns were written in: APPEND or HISTORY
    target: str
    high_water: int  # the newest source version its rows carry


@dataclass(frozen=True)
class Keep:
    """Continue the target: its rows up to ``high_water`` stay."""

    high_water: int


@dataclass(frozen=True)
class KeepRefused:
    message: str


def judge_left(
    name: str, mode: Mode, left: LeftTarget | None, checkpoint: CheckpointView | None, source_version: int
) -> Keep | KeepRefused | None:
    """What the pass does with ``left`` (None: nothing to keep, the plan goes on as before)."""
    if left is None or left.layout not in FEED_ONLY or (checkpoint is not None and checkpoint.target_matches):
        return None  # nothing only it holds, or the checkpoint's own target (checked against its record)
    holds = _holds(left)
    discard = f"'sharesync reset {name} --discard-target' removes it (its rows are lost)"
    if left.layout is not mode:
        return KeepRefused(
            f"target {left.target} holds {holds}, which the provider cannot rebuild, and {name} is set to "
            f"'{mode.value}' mode now; sharesync will not replace it. Point 'target' at a new path, or {discard}"
        )
    if checkpoint is not None:
        return KeepRefused(
            f"target {left.target} holds {holds} that this table's checkpoint was not written for (the config "
            f"moved the table there); sharesync will not replace it. 'sharesync reset {name}' continues it, "
            f"{discard}"
        )
    if left.high_water > source_version:
        return KeepRefused(
            f"target {left.target} holds {holds}, past the provider's version {source_version} (its table was "
            f"re-created or rewound): continuing it would mix two version sequences. Point 'target' at a new "
            f"path, or {discard}"
        )
    return Keep(left.high_water)


def judge_restart(
    name: str, mode: Mode, checkpoint: CheckpointView | None, source: SourceView, version: int, backfill: bool
) -> Keep | KeepRefused | None:
    """An append or history target whose checkpoint's provider table restarted its versions
    (re-created or rewound), bootstrapped from its snapshot at ``version``; None: not that case."""
    if mode not in FEED_ONLY or checkpoint is None or not checkpoint.target_matches:
        return None
    if not restarted(checkpoint, source):
        return None
    if version > checkpoint.version and backfill:
        return KeepRefused(
            f"the provider re-created or rewound {name}'s table and its target holds rows only it has; run "
            f"'sharesync sync {name}' first (it continues them), then the backfill"
        )
    if version > checkpoint.version:  # every row kept is older than the snapshot's: one sequence still
        return Keep(checkpoint.version)
    holds = "change log" if mode is Mode.APPEND else "row history"
    # A re-created table keeps its new id, so a later pass still sees the restart and continues the
    # kept rows from a snapshot. A rewound one keeps its id: once its versions pass the checkpoint
    # nothing tells the restart apart, so waiting is no way on for it.
    wait = f"Sync again once the provider's version passes {checkpoint.version} (the {holds} then continues from its snapshot), "
    what = f"re-created its table (id {checkpoint.source_table_id} → {source.table_id})"
    if not recreated(checkpoint, source):
        what, wait = "rewound its table's versions", "Ask the provider why, then "
    return KeepRefused(
        f"the provider {what}: its version {version} does not pass {checkpoint.version}, where the target's "
        f"{holds} ends, and continuing it would mix two version sequences; nothing was written. {wait}"
        f"point 'target' at a new path, or run 'sharesync reset {name} --discard-target' (its rows are lost)"
    )


def switch_refused(was: Mode, now: Mode) -> bool:
    """Whether the config may not move a synced target from mode ``was`` to ``now`` (same path):
    out of append or history mode the log or history is lost; into history mode a history would
    begin on rows that never had one. ``sharesync reset`` is the deliberate way."""
    return was is not now and (was in FEED_ONLY or now is Mode.HISTORY)


def kept_warning(mode: Mode, target: str, high_water: int, version: int) -> str:
    """What the run record, the CLI and Dagster say when a reset target is continued."""
    return f"no checkpoint (reset or lost): target {target} {continued(mode, high_water, version)}"


def continued(mode: Mode, high_water: int, version: int, name: str = "") -> str:
    """How a kept change log or row history goes on from the snapshot at ``version``."""
    then = (
        f"the snapshot at version {version} lands as insert rows at that version"
        if mode is Mode.APPEND
        else f"its open rows close at version {version} and the snapshot's rows open there"
    )
    what = "change log" if mode is Mode.APPEND else "row history"
    reset = f"sharesync reset {name} --discard-target" if name else "sharesync reset --discard-target"
    return (
        f"keeps its {what} up to source version {high_water} and continues from the provider's snapshot: "
        f"{then} ('{reset}' starts it anew)"
    )


def _holds(left: LeftTarget) -> str:
    what = "an append-mode change log" if left.layout is Mode.APPEND else "a history-mode row history"
    return f"{what} up to source version {left.high_water}"
