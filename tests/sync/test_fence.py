"""The stale-writer fence's numbers (sharesync.sync.core.fence): ordered by holding, then by commit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sharesync.sync.core.fence import MAX_SEQUENCE, app_id, overtaken, txn_version

T0 = datetime(2026, 11, 28, 10, 0, tzinfo=UTC)


def test_a_later_holding_outnumbers_every_commit_of_an_earlier_one() -> None:
    # A new holder acquires only after the old lease expired by the database's clock: at least a
    # millisecond later (the lease ttl is seconds); its first commit is above the old one's last.
    assert txn_version(T0 + timedelta(milliseconds=1), 1) > txn_version(T0, MAX_SEQUENCE)


def test_commits_of_one_holding_increase() -> None:
    numbers = [txn_version(T0, n) for n in range(1, 5)]
    assert numbers == sorted(numbers) and len(set(numbers)) == 4


def test_the_number_depends_on_the_instant_only() -> None:
    # The database may hand back another zone; provider versions play no part (a backfill rewinds them).
    assert txn_version(T0.astimezone(timezone(timedelta(hours=5))), 3) == txn_version(T0, 3)
    assert txn_version(datetime(2262, 1, 1, tzinfo=UTC), MAX_SEQUENCE) < 2**63  # a Delta txnVersion is a long


def test_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="out of the fence's range"):
        txn_version(T0, 0)
    with pytest.raises(ValueError, match="out of the fence's range"):
        txn_version(T0, MAX_SEQUENCE + 1)
    with pytest.raises(ValueError, match="aware"):
        txn_version(T0.replace(tzinfo=None), 1)


def test_only_a_higher_record_means_overtaken() -> None:
    last = txn_version(T0, 2)
    assert overtaken(txn_version(T0 + timedelta(seconds=61), 1), last)  # a later holding wrote
    assert not overtaken(last, last)  # this holding's own commit is the latest
    assert not overtaken(None, last)  # an engine that records nothing (Sail)
    assert not overtaken(txn_version(T0, 1), last)  # a commit that wrote nothing left the older record


def test_one_id_per_table() -> None:
    assert app_id("s.b.t") == "sharesync:s.b.t" != app_id("s.b.u")
