"""The target before a job touches it: its state, and the checks that refuse an unusable one.

Checks happen before any write, with ``deltalake`` and the filesystem, so an unusable target
fails fast with a clear :class:`TargetError` instead of an engine stack trace half-way through a
job. This assumes the target is reachable from this process as well as from the engine — the
same requirement as the staging directory, whose files the engine reads. A target in an object
store gets the same checks through pyarrow's filesystem (:mod:`sharesync.sync.core.location`),
with the ``storage:`` settings of its prefix; whether it is writable shows only by writing, so
the run probes it once per pass (:func:`~sharesync.sync.core.location.probe_writable`).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

from sharesync.pipelines.targets.delta.open import open_target
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.core.errors import TargetError
from sharesync.sync.core.location import DIR_MARKER, Location, probe_writable, storage_failure
from sharesync.sync.core.storage import local_path

__all__ = ["check_storage_access", "inspect_target"]

# Sail 0.7 percent-encodes other characters when it writes a Delta table (the log lands in
# "a%20b", the data files in "a%2520b"), so such a target would silently end up elsewhere.
_SAFE_PATH = re.compile(r"[A-Za-z0-9/._\-!$&'()+,;=:@]*")


def inspect_target(target: Location) -> TargetState:
    """Version and schema of the Delta table at ``target``; TargetError if it cannot be one."""
    path = target.uri
    _check_characters(path)
    local = local_path(path)
    if local is not None:
        _check_local(local, path)
        if not (local / "_delta_log").is_dir():
            return TargetState(target, None, None)
    elif not _check_remote(target):
        return TargetState(target, None, None)
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_target(target)
    except TableNotFoundError:
        # No commit yet: either nothing there, or files left by a write that crashed before
        # its first commit — uncommitted files are not part of any Delta table.
        return TargetState(target, None, None)
    except Exception as exc:
        raise TargetError(f"target '{path}' cannot be read as a Delta table: {exc}") from exc
    return TargetState(target, table.version(), json.loads(table.schema().to_json()))


def check_storage_access(target: Location, staging_dir: Location) -> None:
    """Probe-write a target and a staging directory in object storage, before anything downloads.

    Wrong credentials, a missing bucket or an unreachable endpoint then stop the table with one
    line naming the location and the setting to fix, and nothing is written; local paths have
    their own checks in :func:`inspect_target`.
    """
    probe_writable(target, f"target '{target}'")
    probe_writable(staging_dir, f"staging_dir '{staging_dir}'")


def _check_characters(path: str) -> None:
    location = urlparse(path).path if "://" in path else path
    bad = sorted({ch for ch in location if not _SAFE_PATH.fullmatch(ch)})
    if bad:
        shown = ", ".join(repr(ch) for ch in bad)
        raise TargetError(
            f"target '{path}' contains {shown}; the Delta writer of the embedded engine (Sail) misplaces "
            "tables whose path needs URL encoding. Use letters, digits and - _ . @ + = , : ; ! $ & ' ( )"
        )


# Delta writers (Sail, delta-rs, Delta Lake on Spark) write a table's data files first and its
# log last: a process killed during the first write of a target leaves only these behind.
_DATA_FILE = re.compile(
    r"part-\d{5}-[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?:-c\d{3})?(?:\.\w+)*\.parquet(?:#\d+)?"
)
_PARTITION_DIR = re.compile(r"[^=]+=.*")


def _uncommitted_write(entries: Sequence[tuple[str, bool]]) -> bool:
    """True when ``entries`` (relative path, is a file) are nothing but data files of a Delta
    write that never committed.

    Such files belong to no table (uncommitted files are not part of any Delta table version),
    so the next attempt may create the table there. Anything else — a CSV, a finished Spark
    parquet dataset (it has ``_SUCCESS``), a folder that is not ``column=value`` — is refused.
    """
    found = False
    for name, is_file in entries:
        *folders, base = name.split("/")
        if any(not _PARTITION_DIR.fullmatch(part) for part in (folders if is_file else [*folders, base])):
            return False
        if not is_file or base.startswith("."):
            continue  # checksums and other hidden files writers leave next to data files
        if not _DATA_FILE.fullmatch(base):
            return False
        found = True
    return found


def _local_entries(local: Path) -> list[tuple[str, bool]]:
    entries = []
    for directory, folders, files in os.walk(local):
        relative = Path(directory).relative_to(local)
        entries += [((relative / name).as_posix(), False) for name in folders]
        entries += [((relative / name).as_posix(), True) for name in files]
    return entries


def _check_remote(where: Location) -> bool:
    """The object-store twin of :func:`_check_local`; True when a Delta log is there.

    A Delta log costs one look; only a prefix without one is listed in full (a new target is
    empty, or holds the files of a first write that crashed).
    """
    path = where.uri
    try:
        if where.kind() == "file":
            raise TargetError(f"target '{path}' is an object (a file), not a directory; point 'target' at a prefix")
        if where.join("_delta_log").kind() == "directory":
            return True
        entries = [(name, is_file) for name, is_file in where.children(recursive=True) if name != DIR_MARKER]
    except OSError as exc:
        raise storage_failure(exc, f"target '{path}'", where) or TargetError(
            f"target '{path}' cannot be listed: {exc}"
        ) from None
    if any(is_file for _, is_file in entries) and not _uncommitted_write(entries):
        raise TargetError(
            f"target '{path}' exists and is not a Delta table (no _delta_log); sharesync will not "
            "write into a prefix holding other objects. Choose a new or empty prefix."
        )
    return False


def _check_local(local: Path, shown: str) -> None:
    if local.exists() and not local.is_dir():
        raise TargetError(f"target '{shown}' is a file, not a directory; point 'target' at a directory")
    foreign = local.is_dir() and not (local / "_delta_log").is_dir()
    if (
        foreign
        and any(not e.name.startswith(".") for e in local.iterdir())
        and not _uncommitted_write(_local_entries(local))
    ):
        raise TargetError(
            f"target '{shown}' exists and is not a Delta table (no _delta_log); sharesync will not "
            "write into a directory holding other files. Choose a new or empty directory."
        )
    existing = local
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise TargetError(
            f"target '{shown}' cannot be created: '{existing}' is a file, not a directory; "
            "point 'target' at a path below a directory"
        )
    probe = [existing, existing / "_delta_log"] if (existing / "_delta_log").is_dir() else [existing]
    for directory in probe:
        if not os.access(directory, os.W_OK | os.X_OK) or (directory is existing and not _can_create_in(existing)):
            raise TargetError(
                f"target '{shown}' is not writable ('{directory}' denies write access to this user); "
                "fix its permissions or choose another path"
            )


def _can_create_in(directory: Path) -> bool:
    """Whether this process can create an entry in ``directory``, found by doing it: ``os.access``
    says yes to root everywhere, and ``/proc`` or a file system mounted read-only refuse what the
    mode bits allow. The probe is a hidden directory (no Delta reader looks at those), gone at once."""
    try:
        probe = tempfile.mkdtemp(prefix=".sharesync-probe-", dir=directory)
    except OSError:
        return False
    os.rmdir(probe)
    return True
