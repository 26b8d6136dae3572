"""Run rows as the lease and run-history code both write them: closing abandoned runs, error
text as stored, and retention. (Its own module: leases close runs, and runs are started under a lease.)"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, func, select, update

from sharesync.state.models import RunRow
from sharesync.state.records import RunStatus
from sharesync.sync.core.redact import redact

# Stored error text is for people reading `status`; a full Spark trace would bloat every row.
MAX_ERROR_CHARS = 8_000


def abandon_running(conn: Connection, name: str, now: datetime, reason: str) -> tuple[int, ...]:
    """Close every run of ``name`` still marked running as failed with ``reason``; their ids.

    Only for a caller that holds (or just took) ``name``'s lease, in its transaction.
    """
    closed = conn.execute(
        update(RunRow)
        .where(RunRow.table_name == name, RunRow.status == RunStatus.RUNNING.value)
        .values(status=RunStatus.FAILED.value, finished_at=now, error=clean_error(reason))
        .returning(RunRow.id)
    ).scalars()
    return tuple(sorted(closed))


def clean_error(error: str | None) -> str | None:
    """Error text as stored: redacted, and bounded to :data:`MAX_ERROR_CHARS`."""
    if error is None:
        return None
    cleaned = redact(error)
    if len(cleaned) > MAX_ERROR_CHARS:
        cleaned = cleaned[: MAX_ERROR_CHARS - 20] + " … [truncated]"
    return cleaned


def prune_finished(conn: Connection, cutoff: datetime, name: str | None = None) -> int:
    """Delete finished runs (of ``name``, or of every table) started before ``cutoff``; how many.

    Each table's newest succeeded and newest failed run stay whatever their age: ``status``
    and Dagster show the last outcome, and "when did this last work" outlives any retention.
    Running runs stay too (a live run, or one the table's next run closes as abandoned).
    """
    finished = RunRow.status != RunStatus.RUNNING.value
    keep = select(func.max(RunRow.id)).where(finished).group_by(RunRow.table_name, RunRow.status)
    doomed = delete(RunRow).where(finished, RunRow.started_at < cutoff)
    if name is not None:
        keep = keep.where(RunRow.table_name == name)
        doomed = doomed.where(RunRow.table_name == name)
    return conn.execute(doomed.where(RunRow.id.not_in(keep.scalar_subquery()))).rowcount
