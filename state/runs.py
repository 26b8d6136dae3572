"""Run history: one row per sync batch of a table, with counters and redacted error text.

A run left ``running`` by a process that died is closed as abandoned (failed, with an error
saying so) by whoever next owns the table: the next run to start, or a contender that took
the lease over from the dead process. Both happen only while holding the table's lease — checked
in the same transaction — so the old run's process must be gone. A failed attempt that never got as far as a run (a
config error, a held lease) is recorded with :meth:`RunHistory.record_failed_run`, which
touches no other run: it may be written without the lease.

Retention (``run_retention``, from the config's ``run_history_days``): closing a run, or
recording a failed attempt, also deletes that table's finished runs older than the retention in
the same transaction, so the history stays bounded by normal passes alone;
:meth:`RunHistory.prune_runs` does it for every table (``sharesync db prune``). Each table's
newest succeeded and newest failed run are always kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from sharesync.state.lease_table import require_lease
from sharesync.state.models import RunRow
from sharesync.state.records import Lease, RunRecord, RunStats, RunStatus
from sharesync.state.run_rows import abandon_running, clean_error, prune_finished
from sharesync.state.store_base import AnyRow, StoreBase
from sharesync.sync.core.errors import RunAlreadyFinished, StateError

ABANDONED = (
    "abandoned: a newer run of this table started, so the process running this one stopped "
    "without finishing (crash, kill, or lost lease)"
)

_RUN_COLUMNS = (
    RunRow.id,
    RunRow.table_name,
    RunRow.status,
    RunRow.start_version,
    RunRow.end_version,
    RunRow.started_at,
    RunRow.finished_at,
    RunRow.rows_inserted,
    RunRow.rows_updated,
    RunRow.rows_deleted,
    RunRow.files_downloaded,
    RunRow.bytes_downloaded,
    RunRow.url_refreshes,
    RunRow.error,
    RunRow.note,
)


class RunHistory(StoreBase):
    """The run-history part of :class:`sharesync.state.store.StateStore`."""

    def start_run(
        self, name: str, *, start_version: int | None = None, end_version: int | None = None, lease: Lease
    ) -> int:
        """Record that a run of ``name`` starts now, under ``lease``; return its id.

        Any run of ``name`` still marked running is then known to be dead and is marked failed
        as abandoned — checked in the same transaction: a holder that lost the lease (frozen
        past its expiry) gets :class:`LeaseHeld` and closes nobody's live run.
        """
        with self._db.write(f"starting a run of {name}") as conn:
            now = self._now(conn)
            require_lease(conn, lease, now)
            abandon_running(conn, name, now, ABANDONED)
            run_id = conn.execute(
                insert(RunRow)
                .values(
                    table_name=name,
                    start_version=start_version,
                    end_version=end_version,
                    status=RunStatus.RUNNING.value,
                    started_at=now,
                )
                .returning(RunRow.id)
            ).scalar_one()
        return run_id

    def finish_run(
        self,
        run_id: int,
        status: RunStatus,
        stats: RunStats | None = None,
        error: str | None = None,
        *,
        end_version: int | None = None,
        note: str | None = None,
    ) -> RunRecord:
        """Close a running run as succeeded or failed, with its counters and (redacted) error.

        ``end_version`` overrides the one given at start (a run may stop early). ``note``: a
        warning worth keeping on a run that succeeded (redacted and bounded like errors).
        Raises :class:`StateError` if the run does not exist, :class:`RunAlreadyFinished` if it
        is no longer running.
        """
        if status is RunStatus.RUNNING:
            raise ValueError("finish_run needs a final status: succeeded or failed")
        values = _outcome(status, stats or RunStats(), error, note)
        if end_version is not None:
            values["end_version"] = end_version
        with self._db.write(f"finishing run {run_id}") as conn:
            values["finished_at"] = self._now(conn)
            done = conn.execute(
                update(RunRow).where(RunRow.id == run_id, RunRow.status == RunStatus.RUNNING.value).values(**values)
            ).rowcount
            record = self._run(conn, run_id)
            if record is not None and done == 1:
                self._prune(conn, values["finished_at"], record.table)
        if record is None:
            raise StateError(f"no run with id {run_id} in state store {self.url}")
        if done != 1:
            raise RunAlreadyFinished(
                f"run {run_id} of {record.table} was already finished as {record.status.value}"
                + (f" ({record.error[:200]})" if record.error else "")
            )
        return record

    def record_failed_run(
        self,
        name: str,
        error: str,
        *,
        start_version: int | None = None,
        end_version: int | None = None,
        stats: RunStats | None = None,
    ) -> RunRecord:
        """Record an attempt that failed before (or without) starting a run, as one finished row.

        For failures before the first batch — a config error, a failed metadata call, a held
        lease — so the run history and ``status`` show them. Other runs of ``name`` are left
        alone, so this needs no lease. The versions are those the attempt was after, if known.
        """
        values = _outcome(RunStatus.FAILED, stats or RunStats(), error, None)
        with self._db.write(f"recording a failed run of {name}") as conn:
            now = self._now(conn)
            run_id = conn.execute(
                insert(RunRow)
                .values(
                    table_name=name,
                    start_version=start_version,
                    end_version=end_version,
                    started_at=now,
                    finished_at=now,
                    **values,
                )
                .returning(RunRow.id)
            ).scalar_one()
            record = self._run(conn, run_id)
            self._prune(conn, now, name)
        assert record is not None
        return record

    def prune_runs(self, keep: timedelta | None = None) -> int:
        """Delete every table's finished runs older than ``keep`` (default: the store's
        retention), except each table's newest succeeded and newest failed run; how many."""
        keep = keep if keep is not None else self._run_retention
        if keep is None or keep <= timedelta(0):
            raise ValueError("prune_runs needs a positive retention: pass keep, or open the store with run_retention")
        with self._db.write("pruning the run history") as conn:
            return prune_finished(conn, self._now(conn) - keep)

    def _prune(self, conn: Connection, now: datetime, name: str) -> None:
        if self._run_retention is not None:
            prune_finished(conn, now - self._run_retention, name)

    def get_run(self, run_id: int) -> RunRecord | None:
        with self._db.read(f"reading run {run_id}") as conn:
            return self._run(conn, run_id)

    def runs_for(self, name: str, limit: int = 20) -> list[RunRecord]:
        """The latest ``limit`` runs of ``name``, newest first."""
        with self._db.read(f"reading the runs of {name}") as conn:
            rows = conn.execute(
                select(*_RUN_COLUMNS).where(RunRow.table_name == name).order_by(RunRow.id.desc()).limit(limit)
            ).all()
        return [_to_run(row) for row in rows]

    def latest_runs(self, names: Iterable[str] | None = None) -> dict[str, RunRecord]:
        """The newest run of each table (of ``names``, or of every table ever run)."""
        latest = select(func.max(RunRow.id)).group_by(RunRow.table_name)
        if names is not None:
            wanted = list(names)
            if not wanted:
                return {}
            latest = latest.where(RunRow.table_name.in_(wanted))
        with self._db.read("reading the latest runs") as conn:
            rows = conn.execute(select(*_RUN_COLUMNS).where(RunRow.id.in_(latest.scalar_subquery()))).all()
        return {record.table: record for record in map(_to_run, rows)}

    @staticmethod
    def _run(conn: Connection, run_id: int) -> RunRecord | None:
        row = conn.execute(select(*_RUN_COLUMNS).where(RunRow.id == run_id)).first()
        return None if row is None else _to_run(row)


def _outcome(status: RunStatus, stats: RunStats, error: str | None, note: str | None) -> dict[str, Any]:
    return {
        "status": status.value,
        "rows_inserted": stats.rows_inserted,
        "rows_updated": stats.rows_updated,
        "rows_deleted": stats.rows_deleted,
        "files_downloaded": stats.files_downloaded,
        "bytes_downloaded": stats.bytes_downloaded,
        "url_refreshes": stats.url_refreshes,
        "error": clean_error(error),
        "note": clean_error(note),
    }


def _to_run(row: AnyRow) -> RunRecord:
    return RunRecord(
        id=row.id,
        table=row.table_name,
        status=RunStatus(row.status),
        start_version=row.start_version,
        end_version=row.end_version,
        started_at=row.started_at,
        finished_at=row.finished_at,
        stats=RunStats(
            rows_inserted=row.rows_inserted,
            rows_updated=row.rows_updated,
            rows_deleted=row.rows_deleted,
            files_downloaded=row.files_downloaded,
            bytes_downloaded=row.bytes_downloaded,
            url_refreshes=row.url_refreshes,
        ),
        error=row.error,
        note=row.note,
    )
