"""Initial state schema: checkpoints, run history, leases.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Column types are spelled out here (not imported from sharesync.state.models) so this revision keeps
# producing the same schema when the models move on.
UTC_DATETIME = sa.DateTime(timezone=True)
RUN_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sharesync_checkpoints",
        sa.Column("name", sa.String(512), primary_key=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("version_timestamp", UTC_DATETIME, nullable=True),
        sa.Column("table_id", sa.String(512), nullable=False),
        sa.Column("schema_fingerprint", sa.String(512), nullable=False),
        sa.Column("target", sa.Text(), nullable=False),
        sa.Column("mode", sa.String(32), nullable=False),
        sa.Column("updated_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("version >= 0", name="ck_sharesync_checkpoints_version"),
    )
    op.create_table(
        "sharesync_runs",
        sa.Column("id", RUN_ID, primary_key=True, autoincrement=True),
        sa.Column("table_name", sa.String(512), nullable=False),
        sa.Column("start_version", sa.BigInteger(), nullable=True),
        sa.Column("end_version", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rows_inserted", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("rows_updated", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("rows_deleted", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("files_downloaded", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("bytes_downloaded", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("started_at", UTC_DATETIME, nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint("status IN ('running', 'succeeded', 'failed')", name="ck_sharesync_runs_status"),
    )
    op.create_table(
        "sharesync_leases",
        sa.Column("name", sa.String(512), primary_key=True),
        sa.Column("owner", sa.String(512), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("acquired_at", UTC_DATETIME, nullable=False),
        sa.Column("renewed_at", UTC_DATETIME, nullable=False),
        sa.Column("expires_at", UTC_DATETIME, nullable=False),
    )


def downgrade() -> None:
    # sharesync never downgrades a state store; older releases refuse newer schemas instead.
    raise NotImplementedError("downgrade is not supported")
