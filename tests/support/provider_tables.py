"""Sample provider tables under one share and schema of a local sharing server's root.

The e2e and reliability suites both build their provider this way; each sets ``share`` and
``schema`` (its table names must not collide with the other's) and ``provider`` (the root).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import ClassVar

from sharesync.sync.server.samples import apply_random_commits, create_sample_table, table_path


class ProviderTables:
    share: ClassVar[str]
    schema: ClassVar[str]
    provider: Path

    @classmethod
    def name(cls, table: str) -> str:
        return f"{cls.share}.{cls.schema}.{table}"

    def path(self, table: str) -> Path:
        return table_path(self.provider, self.share, self.schema, table)

    def table(self, table: str, *, rows: int = 40, partitioned: bool = True, cdf: bool = True, seed: int = 0) -> Path:
        """Create the table at version 0: all sample types, nulls everywhere but ``id``."""
        return create_sample_table(self.path(table), rows=rows, partitioned=partitioned, cdf=cdf, seed=seed)

    def commit(self, table: str, n: int, seed: int) -> list[str]:
        """``n`` random commits (inserts, updates, deletes); their descriptions."""
        return apply_random_commits(self.path(table), random.Random(seed), n)
