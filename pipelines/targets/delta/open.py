"""A target's Delta table as ``deltalake`` reads it: opened in one place, with its storage settings.

Every reader of a target — identity, statistics, history, commit metrics, checks, ``verify`` —
opens it here, from a :class:`~sharesync.sync.core.location.Location` located with the config's
``storage:`` settings (:meth:`sharesync.pipelines.run.pass_resources.PassResources.locate`), so no reader can reach
an object store with other settings than the engine writes with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

__all__ = ["open_existing", "open_target"]


def open_target(target: Location) -> DeltaTable:
    """The Delta table at ``target`` (deltalake's own errors: ``TableNotFoundError`` when there is none)."""
    from deltalake import DeltaTable

    return DeltaTable(target.uri, storage_options=target.storage_options)


def open_existing(target: Location) -> DeltaTable | None:
    """The Delta table at ``target``; None when there is none (no log, or a log without a commit)."""
    from deltalake.exceptions import TableNotFoundError

    from sharesync.sync.core.storage import local_path

    local = local_path(target.uri)
    if local is not None and not (local / "_delta_log").is_dir():
        return None
    try:
        return open_target(target)
    except TableNotFoundError:
        return None  # a log without a commit: no table yet
