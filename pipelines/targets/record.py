"""The record sharesync leaves in each batch's target commit: which provider table, which versions.

Format-neutral: a format stores :meth:`CommitRecord.encode` with the batch's commit (Delta: the
commit's ``userMetadata``) and reads the newest back
(:meth:`~sharesync.pipelines.targets.port.TargetFormat.read_record`). Why it exists and when it is
written: :mod:`sharesync.pipelines.targets.delta.commit_record`.
"""

from __future__ import annotations

import json
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sharesync.sync.core.timestamps import from_millis

__all__ = ["KEY", "CommitRecord", "Recorded"]

KEY = "sharesync"  # the JSON key of the record in commitInfo.userMetadata


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
