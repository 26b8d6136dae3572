"""What a target says it holds: the provider table and versions each sharesync commit applied.

The state store is not the only copy of the truth. Every batch leaves a record in the target's
own Delta log — ``commitInfo.userMetadata`` of a commit, a JSON object under the key
``sharesync`` (:class:`CommitRecord`) — naming the provider table (``provider/share.schema.table``
and its table id) and the range of source versions applied, with what a checkpoint needs besides
(schema fingerprint, the last version's commit time, the mode). A lost or older state store is
rebuilt from it (:func:`read_record`; ``sharesync db recover``, and each pass by itself).

The record (:class:`~sharesync.pipelines.targets.record.CommitRecord`) is written by the job's
write (:mod:`sharesync.pipelines.targets.delta.write`) in the batch's own commit where the engine
allows, else the rows' guard versions stand for it: never before the data, so a record never claims more than its target holds (see docs/guarantees.md,
"Losing the state store"). Read here with ``deltalake``, no Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.open import open_existing
from sharesync.pipelines.targets.facts import RESTORE
from sharesync.pipelines.targets.record import CommitRecord, Recorded
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["LOOK_BACK", "read_record"]

# Commits read back from the newest for the latest record: other writers' commits (an OPTIMIZE,
# a VACUUM) may come after it; past this many the target counts as unrecorded.
LOOK_BACK = 100


def read_record(target: Location, table: str) -> Recorded | None:
    """The newest record of ``table`` in the target's log; None when there is none to trust.

    Read back from the newest commit: one of another table (the target was replaced), a RESTORE
    (the records before it may describe rows that are gone), or nothing in :data:`LOOK_BACK`
    commits — none. The rolled-back and replaced cases are the identity check's.
    """
    delta = open_existing(target)
    if delta is None:
        return None
    return _newest(delta, table)


def _newest(delta: DeltaTable, table: str) -> Recorded | None:
    version = delta.version()
    for commit in delta.history(LOOK_BACK):  # newest first
        if commit.get("operation") == RESTORE:
            return None
        record = CommitRecord.decode(commit.get("userMetadata"))
        if record is None:
            continue
        if record.table != table:
            return None
        return Recorded(
            record=record,
            at_version=int(commit["version"]),
            target_table_id=str(delta.metadata().id),
            target_version=version,
        )
    return None
