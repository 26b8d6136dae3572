"""Checkpoints: compare-and-swap, never read-modify-write.

``advance_checkpoint(new, expected_version=v)`` is one ``UPDATE … WHERE version = v``;
whoever loses gets :class:`CheckpointConflict` and must re-plan from the stored checkpoint.
``expected_version=None`` means "must not exist yet" (bootstrap). A version only moves
backwards together with a new source ``table_id`` (provider re-created the table), or on an
explicit ``rewind``. Given a ``lease``, the advance also fails with :class:`LeaseHeld` unless
that lease is still held, checked under a row lock in the same transaction (fencing).
"""

from __future__ import annotations

from sqlalchemy import Connection, delete, select, update

from sharesync.state.lease_table import require_lease
from sharesync.state.models import CheckpointRow
from sharesync.state.records import CHECKPOINT_COLUMNS, Checkpoint, Lease, checkpoint_from_row
from sharesync.state.store_base import StoreBase
from sharesync.sync.core.errors import CheckpointConflict

_CHECKPOINT_COLUMNS = tuple(CheckpointRow.__table__.c[name] for name in CHECKPOINT_COLUMNS)


class Checkpoints(StoreBase):
    """The checkpoint part of :class:`sharesync.state.store.StateStore`."""

    def get_checkpoint(self, name: str) -> Checkpoint | None:
        with self._db.read(f"reading the checkpoint of {name}") as conn:
            return self._checkpoint(conn, name)

    def list_checkpoints(self) -> list[Checkpoint]:
        with self._db.read("listing checkpoints") as conn:
            rows = conn.execute(select(*_CHECKPOINT_COLUMNS).order_by(CheckpointRow.name)).all()
        return [checkpoint_from_row(tuple(row)) for row in rows]

    def advance_checkpoint(
        self, new: Checkpoint, *, expected_version: int | None, lease: Lease | None = None, rewind: bool = False
    ) -> Checkpoint:
        """Compare-and-swap the checkpoint of ``new.name`` from ``expected_version`` to ``new``.

        ``expected_version=None``: the checkpoint must not exist yet (first bootstrap).
        Raises :class:`CheckpointConflict` when the stored version is not the expected one,
        :class:`LeaseHeld` when ``lease`` is given and no longer held, and ``ValueError`` when
        the version would move backwards without a new ``table_id`` — unless ``rewind``: the
        caller moves it back on purpose (a backfill replays from an older version, a bootstrap
        replaced the target with an older snapshot), still compare-and-swapped.
        Every field of ``new`` is written, the ``target_*`` identity included (``None``: not
        known after this advance). Returns the stored checkpoint (with ``updated_at`` set).
        """
        if lease is not None and lease.name != new.name:
            raise ValueError(f"lease is for '{lease.name}', checkpoint for '{new.name}'")
        with self._db.write(f"advancing the checkpoint of {new.name}") as conn:
            now = self._now(conn)
            if lease is not None:
                require_lease(conn, lease, now)
            values = {
                "version": new.version,
                "version_timestamp": new.version_timestamp,
                "table_id": new.table_id,
                "schema_fingerprint": new.schema_fingerprint,
                "target": new.target,
                "mode": new.mode,
                "target_table_id": new.target_table_id,
                "target_version": new.target_version,
                "target_mode": new.target_mode,
                "updated_at": now,
            }
            if expected_version is None:
                stmt = (
                    self._upsert()(CheckpointRow)
                    .values(name=new.name, **values)
                    .on_conflict_do_nothing(index_elements=[CheckpointRow.name])
                    # RETURNING, not rowcount: psycopg reports -1 for INSERTs through SQLAlchemy 2.1.
                    .returning(CheckpointRow.name)
                )
                won = conn.execute(stmt).first() is not None
            else:
                cas = (
                    update(CheckpointRow)
                    .where(CheckpointRow.name == new.name, CheckpointRow.version == expected_version)
                    .values(**values)
                )
                if new.version < expected_version and not rewind:
                    cas = cas.where(CheckpointRow.table_id != new.table_id)
                won = conn.execute(cas).rowcount == 1
            if not won:
                self._explain_lost_cas(conn, new, expected_version)
            stored = self._checkpoint(conn, new.name)
        assert stored is not None
        return stored

    def _explain_lost_cas(self, conn: Connection, new: Checkpoint, expected: int | None) -> None:
        current = self._checkpoint(conn, new.name)
        if current is None and expected is None:
            # Lost the insert to a writer whose row was then reset before this read (PostgreSQL
            # reads the latest committed state per statement): still somebody else's turn.
            raise CheckpointConflict(f"checkpoint of {new.name} changed concurrently; plan again")
        if expected is None:
            assert current is not None
            raise CheckpointConflict(
                f"checkpoint of {new.name} already exists at version {current.version} (expected none): another "
                "sync bootstrapped it first; plan again from the stored checkpoint"
            )
        if current is None:
            raise CheckpointConflict(
                f"checkpoint of {new.name} no longer exists (expected version {expected}): it was reset; "
                "plan again (the table will be bootstrapped)"
            )
        if current.version != expected:
            raise CheckpointConflict(
                f"checkpoint of {new.name} is at version {current.version}, not the expected {expected}: another "
                "sync advanced it first; plan again from the stored checkpoint"
            )
        raise ValueError(
            f"checkpoint of {new.name} would move backwards from {expected} to {new.version} with the same "
            f"table id '{new.table_id}'; versions only go back when the provider re-created the table"
        )

    def reset_checkpoint(self, name: str) -> Checkpoint | None:
        """Forget ``name``'s checkpoint (the next sync bootstraps); return what was removed."""
        with self._db.write(f"resetting the checkpoint of {name}") as conn:
            current = self._checkpoint(conn, name)
            if current is not None:
                conn.execute(delete(CheckpointRow).where(CheckpointRow.name == name))
        return current

    @staticmethod
    def _checkpoint(conn: Connection, name: str) -> Checkpoint | None:
        row = conn.execute(select(*_CHECKPOINT_COLUMNS).where(CheckpointRow.name == name)).first()
        return None if row is None else checkpoint_from_row(tuple(row))
