"""Asynchronous query submissions outlive the process that made them.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27

A sync that asks for a snapshot with ``asyncquery=true`` records its idempotency key before
submitting and the provider's ``queryId`` once answered, so a sync killed while the provider
computes resumes polling the same query instead of submitting a duplicate. One row per table
and request (a digest of the request body); the row goes once the answer has been read.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "sharesync_pending_queries",
        sa.Column("table_name", sa.String(512), nullable=False),
        sa.Column("request_key", sa.String(64), nullable=False),
        sa.Column("start_version", sa.BigInteger(), nullable=True),
        sa.Column("end_version", sa.BigInteger(), nullable=True),
        sa.Column("idempotency_key", sa.String(64), nullable=False),
        sa.Column("query_id", sa.Text(), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("table_name", "request_key", name="pk_sharesync_pending_queries"),
    )


def downgrade() -> None:
    raise NotImplementedError("downgrade is not supported")
