"""Runs: a note for succeeded runs that still have something to say (re-bootstrap warnings).

Revision ID: 0003
Revises: 0002
Create Date: 2025-02-01

A run that re-bootstrapped a table (history gap, re-created source, no change data feed)
succeeded, so its warning is not an error; ``status`` shows it as the table's last warning.
Existing rows get no note.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("sharesync_runs", sa.Column("note", sa.Text(), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("downgrade is not supported")
