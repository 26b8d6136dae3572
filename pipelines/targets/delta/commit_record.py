"""What a target says it holds: the provider table and versions each sharesync commit applied.

The state store is not the only copy of the truth. Every batch leaves a record in the target's
own Delta log — ``commitInfo.userMetadata`` of a commit, a JSON object under the key
``sharesync`` (:class:`CommitRecord`) — naming the provider table (``provider/share.schema.table``
and its table id) and the range of source versions applied, with what a checkpoint needs besides
(schema fingerprint, the last version's commit time, the mode). A lost or older state store is
rebuilt from it (:func:`read_record`; ``sharesync db recover``, and each pass by itself).

The record is written by :func:`sharesync.pipelines.jobs.record.record_batch` in the batch's own
commit where the engine allows, else in a commit of its own right after the batch's: never
before the data, so a record never claims more than its target holds (see docs/guarantees.md,
"Losing the state store"). Read here with ``deltalake``, no Spark.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sharesync.pipelines.targets.delta.identity import RESTORE
from sharesync.pipelines.targets.delta.open import open_existing
from sharesync.sync.core.location import Location
from sharesync.sync.core.timestamps import from_millis

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["KEY", "LOOK_BACK", "CommitRecord", "Recorded", "read_record"]

KEY = "sharesync"  # the JSON key of the record in commitInfo.userMetadata
# Commits read back from the newest for the latest record: other writers' commits (an OPTIMIZE,
# a VACUUM) may come after it; past this many the target counts as unrecorded.
LOOK_BACK = 100


class CommitRecord(BaseModel):
    """One batch as its target commit records it (``from``/``to``: the source versions applied)."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    table: str  # the table's key: provider/share.schema.table (bare for the default provider)
    table_id: str = Field(alias="tableId")  # the provider's table id (metaData.id)
    start: int = Field(alias="from", ge=0)
    end: int = Field(alias="to", ge=0)
    mode: str
    schema_fingerprint: str = Field(alias="schema")
    committed_ms: int | None = Field(default=None, alias="committedMs")  # the end version's commit time

    def encode(self) -> str:
        """The ``userMetadata`` string: one small JSON object."""
        return json.dumps({KEY: self.model_dump(by_alias=True)}, separators=(",", ":"), sort_keys=True)

    @property
    def committed(self) -> datetime | None:
        return from_millis(self.committed_ms) if self.committed_ms is not None else None

    @classmethod
    def decode(cls, text: object) -> CommitRecord | None:
        """The record in a commit's ``userMetadata``; None when it holds none (or someone else's text)."""
        if not isinstance(text, str) or KEY not in text:
            return None
        try:
            found = json.loads(text)
            return cls.model_validate(found[KEY]) if isinstance(found, dict) else None
        except (ValueError, KeyError, TypeError, ValidationError):
            return None


class Recorded(BaseModel):
    """The newest record of one table in a target, and the target as it is now."""

    model_config = ConfigDict(frozen=True)

    record: CommitRecord
    at_version: int  # the target commit that carries it
    target_table_id: str
    target_version: int


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
