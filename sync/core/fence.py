"""The numbers that fence a stale writer out of a target (Delta's idempotent-write ``txn`` record).

Delta Lake on Spark skips a write whose ``txnAppId`` names an id the target's log records at a
``txnVersion`` at or above the write's own, atomically with the commit (a write racing a commit
that sets the same id fails with a concurrent-transaction conflict). So every target commit of
one lease holding carries the table's :func:`app_id` and a :func:`txn_version` that is

* larger for every later holding than for any earlier one: the holding's acquisition time by the
  state database's clock, in milliseconds, scaled — a new holder can take a lease only after the
  old one expired by that same clock, so its acquisition is later (the lease table: ``expires_at
  <= now``), and
* larger for every later commit of the holding: plus the commit's sequence number in it.

Once a newer holder's first commit is in the log, nothing an older holder still has in flight can
land. Provider versions play no part (a backfill or a reset rewinds them), and neither does the
state store's content (a lost or restored store keeps the clock's order; a generation counter
kept there would go back with it and fence the legitimate writer out — and a lease row is
deleted on release, so a per-lease counter would start again at every acquisition). A clock that went back across two
holdings can only make the *newer* writer's commit skipped, which :func:`overtaken` makes a loud
failure, never a success.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["MAX_SEQUENCE", "app_id", "overtaken", "txn_version"]

MAX_SEQUENCE = 999_999  # commits of one holding; ms since 1970 x 10^6 stays far below 2^63 until year 2262
_SCALE = MAX_SEQUENCE + 1
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)


def app_id(table_key: str) -> str:
    """The ``txnAppId`` of ``table_key``'s target: one per table, whichever process writes it."""
    return f"sharesync:{table_key}"


def txn_version(acquired_at: datetime, sequence: int) -> int:
    """The ``txnVersion`` of commit number ``sequence`` (1, 2, …) of the holding acquired at ``acquired_at``."""
    if not 1 <= sequence <= MAX_SEQUENCE:
        raise ValueError(f"commit {sequence} of one lease holding is out of the fence's range 1..{MAX_SEQUENCE}")
    if acquired_at.tzinfo is None:
        raise ValueError("the lease's acquisition time must be an aware datetime")
    millis = (acquired_at - _EPOCH) // _MILLISECOND
    return millis * _SCALE + sequence


def overtaken(recorded: int | None, last: int) -> bool:
    """Whether the target's recorded ``txnVersion`` says a later holding wrote after (or instead of)
    this holding's commit ``last`` — which the engine then skipped, or will skip.

    ``None`` (no record: an engine that ignores the options, Sail) and a smaller record (a commit
    that wrote nothing) are not: a skip needs a record at or above ``last``, and ``last`` is this
    holding's own number, which no other holding uses.
    """
    return recorded is not None and recorded > last
