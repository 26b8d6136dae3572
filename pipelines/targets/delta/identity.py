"""Which Delta table a target is, and how far it got: its table id, version and high-water mark.

A checkpoint records the target state it was written for (table id, the target version of the
commit that applied its batch, mode), so a target that was deleted, replaced or restored to an
older state is told apart from the one the checkpoint describes (:mod:`sharesync.sync.planning.target_judgement`).

:func:`glance` is the check of a sync with nothing new, so it must stay cheap: for a local target
it stats four paths and imports nothing. The recorded commit is the newest one when
``<version>.json`` exists, ``<version + 1>.json`` does not, and neither it nor the target
directory nor its ``_delta_log`` changed (``ctime``) after the checkpoint was written: a table
copied, moved or re-created in its place — even one with as many commits — has newer ones.
Anything else that touched them (a ``chmod``, another writer) only costs one closer look, after
which the checkpoint is written anew. For a target in an object store it asks for the same two
commit files (two ``HEAD`` requests through pyarrow's filesystem, which it imports: ~0.1 s once
per process), whatever the length of the log — a listing of ``_delta_log/`` would grow with it,
1,000 entries a page: ``<version>.json`` must exist, unchanged since the checkpoint was written
(its last-modified time, to the second), and ``<version + 1>.json`` must not.
Everything else reads the Delta log with ``deltalake`` (no Spark), with the ``storage:``
settings of the target's prefix.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.open import open_existing
from sharesync.pipelines.targets.delta.rows import has_deletion_vectors, max_of
from sharesync.pipelines.targets.facts import RESTORE, Glance, TargetIdentity
from sharesync.sync.core.location import Location, locate
from sharesync.sync.core.storage import StorageSection, local_path

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = ["glance", "high_water_mark", "read_identity"]


def glance(target: str, version: int, checkpoint_written: datetime | None, storage: StorageSection) -> Glance:
    """Whether the target still ends with the commit ``version`` the checkpoint recorded.

    ``target`` as the config names it, with the config's ``storage``: a local one needs no
    :class:`Location` (and so no pyarrow).
    """
    local = local_path(target)
    if local is None:
        return _glance_remote(locate(target, storage), version, checkpoint_written)
    log = local / "_delta_log"
    if not log.is_dir():
        return Glance.MISSING
    try:
        # A change of the directory, of its log or of the commit after the checkpoint was written
        # means someone else was here: a table copied, moved or re-created in its place.
        changed = max(p.stat().st_ctime for p in (local, log, log / f"{version:020d}.json"))
    except OSError:
        return Glance.CHANGED
    if (log / f"{version + 1:020d}.json").exists():
        return Glance.CHANGED
    if checkpoint_written is not None and changed > checkpoint_written.timestamp():
        return Glance.CHANGED
    return Glance.SAME


def _glance_remote(target: Location, version: int, checkpoint_written: datetime | None) -> Glance:
    import pyarrow.fs as pafs

    log = target.join("_delta_log")
    try:
        commit, following = log.filesystem.get_file_info(
            [log.join(f"{version:020d}.json").path, log.join(f"{version + 1:020d}.json").path]
        )
    except OSError:
        return Glance.CHANGED  # unreachable, or refused: the closer look says why
    if commit.type is not pafs.FileType.File or following.type is not pafs.FileType.NotFound:
        return Glance.CHANGED
    modified = commit.mtime
    if (
        checkpoint_written is not None
        and modified is not None
        and modified.timestamp() > checkpoint_written.timestamp()
    ):
        return Glance.CHANGED
    return Glance.SAME


def read_identity(target: Location, *, since: int | None = None) -> TargetIdentity | None:
    """The identity of the Delta table at ``target``; None when there is none.

    ``since``: also look for a RESTORE among the commits after that version.
    """
    table = open_existing(target)
    if table is None:
        return None
    version = table.version()
    return TargetIdentity(
        table_id=str(table.metadata().id),
        version=version,
        columns=tuple(f.name for f in table.schema().fields),
        restored_to=_restored_to(table, version, since) if since is not None and version > since else None,
    )


def high_water_mark(target: Location, *columns: str) -> int | None:
    """The maximum of ``columns`` over the target: the newest source version its rows carry
    (None: no rows, or no such column).

    Read from the files' statistics in the log when every file has them and no deletion vector
    can hide a row they count, else from the column. A column that is NULL in every row of a file (a history target's open rows' valid-to) has
    no maximum there: that file holds nothing newer in it.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    table = open_existing(target)
    present = {f.name for f in table.schema().fields} if table is not None else set()
    if table is None or not set(columns) & present:
        return None
    actions = pa.table(table.get_add_actions(flatten=True))
    trusted = not has_deletion_vectors(table)
    newest: list[int] = []
    for column in [c for c in columns if c in present]:
        stat, nulls = f"max.{column}", f"null_count.{column}"
        if trusted and stat in actions.column_names and _stats_complete(actions, stat, nulls):
            found = pc.max(actions.column(stat)).as_py()
        else:  # some file has no statistics for it, or a DV may hide its maximum: ask the engine
            found = max_of(table, column)
        if found is not None:
            newest.append(int(found))
    return max(newest, default=None)


def _stats_complete(actions: pa.Table, stat: str, nulls: str) -> bool:
    """Every file has a maximum of the column, or is known to hold only NULLs in it."""
    import pyarrow.compute as pc

    missing = pc.is_null(actions.column(stat))
    if nulls not in actions.column_names:
        return bool(actions.column(stat).null_count == 0)
    all_null = pc.equal(actions.column(nulls), actions.column("num_records"))
    return bool(pc.all(pc.or_(pc.invert(missing), pc.fill_null(all_null, False))).as_py())


def _restored_to(table: DeltaTable, version: int, since: int) -> int | None:
    for commit in table.history(version - since):  # newest first
        if int(commit["version"]) > since and commit.get("operation") == RESTORE:
            restored = (commit.get("operationParameters") or {}).get("version")
            try:
                return int(str(restored))
            except (TypeError, ValueError):
                return -1  # restored by timestamp: to some older state
    return None
