"""When a source version was committed: the one place that answers it.

A change file carries its commit's timestamp (:func:`filed_commit_times`), so a batch usually
knows when its last version was committed, and a version's own change feed says when it was.
:func:`version_commit_time` is the answer the run (a batch's last version) and the Dagster layer
(lag and freshness) both take. A version without files — a metadata change, an empty commit, a
compaction (whose files are no data change) — has no timestamp of its own, and the protocol has
no "timestamp of version N" call. It does answer "the first version committed at or after moment
t" (``/version?startingTimestamp``), which is at most N exactly while t is at most N's commit
time: a binary search over the milliseconds since an earlier commit finds that time in about
log2(elapsed ms) calls (~30 for a week). That is paid only for such a batch, and a failed call costs no more than the old answer:
the previous commit time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime, timedelta

from sharesync.sync.core.errors import BadRequest, HistoryUnavailable, SharesyncError
from sharesync.sync.core.timestamps import from_millis, to_millis
from sharesync.sync.protocol.client import ChangesResult, SharingClient
from sharesync.sync.protocol.wire import AddFile, CdfFile, RemoveFile

log = logging.getLogger(__name__)


def filed_commit_times(result: ChangesResult) -> dict[int, int]:
    """Commit timestamp (ms) of every version a changes response has files for (one per commit)."""
    return {f.version: f.timestamp for f in result.files if isinstance(f, AddFile | CdfFile | RemoveFile)}


def version_commit_time(
    client: SharingClient,
    table: str,
    version: int,
    *,
    stamps: Mapping[int, int] | None = None,
    previous: datetime | None = None,
) -> datetime | None:
    """When ``version`` was committed: the one answer, for the run and the Dagster layer alike.

    ``stamps`` are the commit times of a changes answer already read (:func:`filed_commit_times`);
    without them the version's own change files are read. A version without files is searched for
    after the newest earlier commit time known (in ``stamps`` or, failing that, ``previous``), and
    is that earlier time when the search cannot say. None when the provider cannot say (no change
    data feed, no history) or nothing earlier is known.
    """
    if stamps is None:
        try:
            stamps = filed_commit_times(client.changes(table, starting_version=version, ending_version=version))
        except SharesyncError as exc:
            log.info("%s: no commit timestamp for version %d (%s)", table, version, exc)
            return None
    if (own := stamps.get(version)) is not None:
        return from_millis(own)
    earlier = [ms for v, ms in stamps.items() if v < version]
    after = from_millis(max(earlier)) if earlier else previous
    if after is None:
        return None
    return commit_time(client, table, version, after) or after


def commit_time(client: SharingClient, table: str, version: int, after: datetime) -> datetime | None:
    """When ``version`` was committed, given the commit time ``after`` of an earlier version.

    None when the provider cannot say (a call failed, or its clock is ahead of ours).
    """
    low, high = to_millis(after), int(time.time() * 1000)  # committed in (low, high]
    try:
        if low >= high or _at_most(client, table, version, high):
            return None
        # Invariant: the version's commit time is >= low and < high.
        while high - low > 1:
            middle = (low + high) // 2
            if _at_most(client, table, version, middle):
                low = middle
            else:
                high = middle
    except SharesyncError as exc:
        log.info("%s: could not read the commit time of version %s: %s", table, version, exc)
        return None
    return from_millis(low)


def _at_most(client: SharingClient, table: str, version: int, moment_ms: int) -> bool:
    """Whether the first version committed at or after the moment is ``version`` or older."""
    try:
        found = client.table_version(table, starting_timestamp=from_millis(moment_ms)).version
    except HistoryUnavailable:
        raise
    except BadRequest:
        return False  # the moment is after the latest commit
    return found <= version


def version_at(client: SharingClient, name: str, moment: datetime) -> int:
    """The first version committed at or after ``moment``."""
    return client.table_version(name, starting_timestamp=moment).version


def version_at_or_before(client: SharingClient, name: str, moment: datetime) -> int | None:
    """The newest version committed at or before ``moment`` (None: no limit needed)."""
    try:
        after = version_at(client, name, moment + timedelta(milliseconds=1))
    except HistoryUnavailable:
        raise
    except BadRequest:  # not an outage, a refused credential or a missing table: those fail the run
        return None  # the moment is after the latest commit: replay to the latest
    return max(after - 1, 0)
