"""Leases record their holder process; checkpoints record the target state they describe.

Revision ID: 0004
Revises: 0003
Create Date: 2025-03-01

A lease names the process holding it (host, pid, start time, pid namespace), so a contender on
the same host can take over a dead holder's lease at once instead of after its ttl. A
checkpoint names the target it was written for (Delta table id, target version of the commit
that applied the batch, mode), so a lost, replaced or rolled-back target is detected.
Existing rows get NULLs: such leases expire by their ttl as before, and such checkpoints get
their target identity with the next successful batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns: plain ADD COLUMN on both backends, no table rewrite.
    op.add_column("sharesync_leases", sa.Column("holder_host", sa.String(512), nullable=True))
    op.add_column("sharesync_leases", sa.Column("holder_pid", sa.BigInteger(), nullable=True))
    op.add_column("sharesync_leases", sa.Column("holder_started", sa.BigInteger(), nullable=True))
    op.add_column("sharesync_leases", sa.Column("holder_namespace", sa.String(512), nullable=True))
    op.add_column("sharesync_checkpoints", sa.Column("target_table_id", sa.String(512), nullable=True))
    op.add_column("sharesync_checkpoints", sa.Column("target_version", sa.BigInteger(), nullable=True))
    op.add_column("sharesync_checkpoints", sa.Column("target_mode", sa.String(32), nullable=True))


def downgrade() -> None:
    raise NotImplementedError("downgrade is not supported")
