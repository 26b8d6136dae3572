"""How much one sync pass does at once: tables in parallel, downloads in flight, bytes held for netting.

Pass-wide, not per table: they live under ``defaults:`` in the config (the place for settings
that are not a table's own), and one pass — a ``sharesync sync`` or one Dagster run — shares
them among all the tables it syncs.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

MAX_DEFAULT_PARALLEL_TABLES = 8  # the default's cap: beyond it the engine, not sharesync, is the bottleneck


class PassLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    max_parallel_tables: int | None = Field(
        default=None, ge=1, le=64, description="tables one pass syncs at once; null = the CPU count, at most 8"
    )
    max_concurrent_downloads: int = Field(
        default=16, ge=1, le=1024, description="file downloads in flight at once, over all tables of a pass"
    )
    max_staged_megabytes: int = Field(
        default=512,
        ge=1,
        description="downloaded MB a pass holds in memory at once (merge batches netted before the engine reads them)",
    )

    def parallel_tables(self) -> int:
        return self.max_parallel_tables or default_parallel_tables()


def default_parallel_tables() -> int:
    """One table per CPU, at most :data:`MAX_DEFAULT_PARALLEL_TABLES`."""
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_PARALLEL_TABLES))
