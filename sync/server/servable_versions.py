"""Turn version and timestamp arguments into versions the log can serve, or say why not.

One place decides what "available" means, so that ``/version``, ``/query`` and ``/changes``
agree: a snapshot is available while it can be reconstructed and its files are on disk;
a version's changes are available while its commit is in the log and its files are on disk.
When history is gone the answer is :func:`~sharesync.sync.server.problems.history_unavailable`
(400, "... is not available ...", naming the earliest available version), which a client
turns into a re-bootstrap. Other messages follow the reference server / Delta wording.
"""

from __future__ import annotations

from sharesync.sync.core.timestamps import from_millis, parse_timestamp, to_millis, to_wire
from sharesync.sync.server.catalog import SharedTable
from sharesync.sync.server.deltalog import DeltaLog
from sharesync.sync.server.logmodel import Commit, FileEntry, Snapshot, VersionUnavailable
from sharesync.sync.server.problems import ApiError, history_unavailable, invalid


def parse_moment(name: str, value: str) -> int:
    """Epoch ms of a protocol timestamp argument ("Timestamp Format": ISO-8601 UTC)."""
    try:
        return to_millis(parse_timestamp(value))
    except ValueError as exc:
        raise invalid(f"Invalid {name}: {exc}") from None


def _wire(ms: int) -> str:
    return to_wire(from_millis(ms))


def snapshot_at(log: DeltaLog, table: SharedTable, version: int | None, *, check_files: bool) -> Snapshot:
    """The snapshot at ``version`` (latest when None), with history errors worded for clients."""
    try:
        snap = log.snapshot(version)
    except VersionUnavailable as exc:
        if exc.version < exc.earliest:
            raise history_unavailable(table.full_name, exc.earliest, version=exc.version, latest=exc.latest) from None
        # Not "Cannot time travel …" (the reference's wording for both directions): clients read
        # that as lost history, but a version from the future is a wrong argument, not a gap.
        raise invalid(
            f"Table version {exc.version} does not exist: the latest version of {table.full_name} is {exc.latest}."
        ) from None
    if check_files and not log.files_exist(snap.files):
        earliest = _earliest_complete_snapshot(log, snap.version)
        raise history_unavailable(table.full_name, earliest, version=snap.version)
    return snap


def _earliest_complete_snapshot(log: DeltaLog, after: int) -> int:
    """First version after ``after`` whose files are all still on disk (VACUUM ran)."""
    latest = log.latest_version()
    for version in range(after + 1, latest + 1):
        if log.files_exist(log.snapshot(version).files):
            return version
    return latest + 1


def earliest_change_version(log: DeltaLog) -> int:
    """Changes of version v need v's commit and a snapshot at v (its metadata and CDF flag)."""
    return max(log.earliest_change_version(), log.earliest_version())


def commits_in(log: DeltaLog, table: SharedTable, start: int, end: int) -> list[Commit]:
    """The commits of a version range, or "not available" when the log lost some of them."""
    try:
        return log.commits(start, end)
    except VersionUnavailable as exc:
        raise history_unavailable(table.full_name, earliest_change_version(log), version=exc.version) from None


def _after_latest(timestamp: str, stamps: dict[int, int]) -> ApiError:
    """A moment after the latest commit, worded like Delta's ``timestampLaterThanTableLastCommit``
    (the reference server's 400), naming the latest version and when it was committed."""
    latest = max(stamps)
    last = _wire(stamps[latest])
    return invalid(
        f"The provided timestamp ({timestamp}) is after the latest version available to this "
        f"table (version {latest}, committed at {last}). Please use a timestamp before or at {last}."
    )


def version_as_of(log: DeltaLog, table: SharedTable, timestamp: str) -> int:
    """Time travel by timestamp (``/query``, ``/metadata``): the last version committed at or before it.

    A moment after the latest commit is refused, as the reference server does (Delta Kernel's
    ``getSnapshotAsOfTimestamp``): "the version as of" a moment still to come is not known yet,
    and answering the latest would change once a commit lands before that moment.
    """
    return version_at(log, table, timestamp, refuse_after_latest=True)


def version_at(
    log: DeltaLog, table: SharedTable, timestamp: str, name: str = "timestamp", *, refuse_after_latest: bool = False
) -> int:
    """The last version committed at or before the moment; the latest for a moment after it,
    unless ``refuse_after_latest`` (time travel, :func:`version_as_of`).

    Only ``/changes``'s ``endingTimestamp`` takes a moment after the latest commit as is: an end
    bound, clamped to the latest version like ``endingVersion``.
    """
    moment = parse_moment(name, timestamp)
    stamps = log.timestamps()
    if refuse_after_latest and moment > stamps[max(stamps)]:
        raise _after_latest(timestamp, stamps)
    found = next((v for v in sorted(stamps, reverse=True) if stamps[v] <= moment), None)
    if found is not None:
        return found
    first = min(stamps)
    if first > 0:
        raise history_unavailable(table.full_name, log.earliest_version(), timestamp=timestamp)
    raise invalid(
        f"The provided timestamp ({timestamp}) is before the earliest version available to this "
        f"table ({_wire(stamps[first])}). Please use a timestamp after {_wire(stamps[first])}."
    )


def version_at_or_after(log: DeltaLog, table: SharedTable, timestamp: str, name: str) -> int:
    """Starting timestamps: the first version committed at or after it (spec "Query Table Version").

    A moment before the earliest commit still in a cleaned-up log cannot be resolved safely
    (the versions in between are gone), so it is answered as history unavailable.
    """
    moment = parse_moment(name, timestamp)
    stamps = log.timestamps()
    earliest = earliest_change_version(log)
    found = next((v for v in sorted(stamps) if stamps[v] >= moment), None)
    if found is None:
        raise _after_latest(timestamp, stamps)
    if earliest > 0 and found <= earliest:
        # Exactly `earliest` only if the version before it is known to be older than the moment.
        previous = stamps.get(earliest - 1)
        if previous is None or moment <= previous:
            raise history_unavailable(table.full_name, earliest, timestamp=timestamp)
    return found


def check_changes_available(
    log: DeltaLog, table: SharedTable, start: int, end: int, *, verify_files: bool = True
) -> list[Commit]:
    """The commits of ``[start, end]`` if their files are all on disk; else "not available",
    naming the earliest version from which every later version can still be served.
    ``verify_files=False`` skips the files, as the reference server does (vacuumed files then
    surface as 404s from the file endpoint)."""
    earliest = earliest_change_version(log)
    latest = log.latest_version()
    if start < earliest:
        raise history_unavailable(table.full_name, earliest, version=start, latest=latest)
    commits = commits_in(log, table, start, end)
    for commit in reversed(commits if verify_files else []):
        if not log.files_exist(served_change_files(commit)):
            raise history_unavailable(table.full_name, commit.version + 1, version=start, latest=latest)
    return commits


def served_change_files(commit: Commit) -> tuple[FileEntry, ...]:
    """What ``/changes`` serves for a version (spec "Read Change Data Feed", reference CDCReader):
    its ``cdc`` files when it has any, else its data-changing ``add`` and ``remove`` files in log order."""
    if commit.cdcs:
        return commit.cdcs
    return tuple(f for _, f in data_change_actions(commit))


def data_change_actions(commit: Commit) -> tuple[tuple[str, FileEntry], ...]:
    """The commit's data-changing ``add``/``remove`` actions as ``(kind, file)``, in the log's order."""
    return tuple((kind, f) for kind, f in commit.file_actions if f.data_change)


def ensure_positive(name: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise invalid(f"{name} cannot be negative.")
