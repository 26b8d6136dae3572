"""The state store: per-table checkpoints, run history and leases (SQLite or PostgreSQL).

Start at :func:`open_store`; the guarantees are drawn in :mod:`sharesync.state.store`.

Importing this package is cheap: the store and the migrations, which need SQLAlchemy, are
loaded on first use of their names. A sync pass with nothing new never uses them (see
:mod:`sharesync.state.sqlite`), so it never pays for SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from sharesync.state.lease_heartbeat import LeaseKeeper
from sharesync.state.lease_holder import default_owner, is_alive_on_this_host, this_process
from sharesync.state.records import Checkpoint, Holder, Lease, PendingQuery, RunRecord, RunStats, RunStatus, Takeover
from sharesync.state.revisions import head_revision

if TYPE_CHECKING:
    from sharesync.state.migrate import current_revision, upgrade
    from sharesync.state.store import Clock, StateStore, open_store

# Public names that live in modules importing SQLAlchemy: name → module.
_LAZY = {
    "Clock": "sharesync.state.store",
    "StateStore": "sharesync.state.store",
    "open_store": "sharesync.state.store",
    "current_revision": "sharesync.state.migrate",
    "upgrade": "sharesync.state.migrate",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sharesync.state' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


__all__ = [
    "Checkpoint",
    "Clock",
    "Holder",
    "Lease",
    "LeaseKeeper",
    "PendingQuery",
    "RunRecord",
    "RunStats",
    "RunStatus",
    "StateStore",
    "Takeover",
    "current_revision",
    "default_owner",
    "head_revision",
    "is_alive_on_this_host",
    "open_store",
    "this_process",
    "upgrade",
]
