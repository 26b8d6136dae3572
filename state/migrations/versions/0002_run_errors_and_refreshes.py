"""Runs: URL refresh counter, redacted error text, index for per-table history.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-15

``status`` shows why a run failed and how often presigned URLs expired mid-run; the index
serves "latest run per table" and "runs of one table, newest first" without a table scan.
Existing rows get ``url_refreshes = 0`` and no error text.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN works on both backends (SQLite allows it for nullable or defaulted columns).
    op.add_column("sharesync_runs", sa.Column("url_refreshes", sa.BigInteger(), nullable=False, server_default="0"))
    op.add_column("sharesync_runs", sa.Column("error", sa.Text(), nullable=True))
    op.create_index("ix_sharesync_runs_table_id", "sharesync_runs", ["table_name", "id"])


def downgrade() -> None:
    raise NotImplementedError("downgrade is not supported")
