"""The state store: per-table checkpoints, run history and leases (SQLite or PostgreSQL).

Start at :func:`open_store`; the guarantees are drawn in :mod:`state.store`.
"""

from __future__ import annotations

from state.domain import Checkpoint, Lease, RunRecord, RunStats, RunStatus
from state.lease import LeaseKeeper, default_owner
from state.migrate import current_revision, head_revision, upgrade
from state.store import Clock, StateStore, open_store

__all__ = [
    "Checkpoint",
    "Clock",
    "Lease",
    "LeaseKeeper",
    "RunRecord",
    "RunStats",
    "RunStatus",
    "StateStore",
    "current_revision",
    "default_owner",
    "head_revision",
    "open_store",
    "upgrade",
]
