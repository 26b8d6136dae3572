"""Checkpoint contract: compare-and-swap, frozen values, aware UTC — on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from support.state import FakeClock, make_checkpoint

from sharesync.state import Checkpoint, StateStore
from sharesync.sync.core.errors import CheckpointConflict, LeaseHeld

NAME = "share.schema.orders"


def checkpoint(version: int, name: str = NAME, **changes: object) -> Checkpoint:
    return make_checkpoint(name, version, **changes)


def test_missing_checkpoint_is_none(store: StateStore) -> None:
    assert store.get_checkpoint(NAME) is None
    assert store.list_checkpoints() == []


def test_first_advance_creates_and_returns_stored_value(store: StateStore) -> None:
    stored = store.advance_checkpoint(checkpoint(3), expected_version=None)
    assert stored.version == 3 and stored.updated_at is not None
    assert store.get_checkpoint(NAME) == stored
    assert dataclasses.replace(stored, updated_at=None) == checkpoint(3)


def test_create_when_it_already_exists_conflicts(store: StateStore) -> None:
    store.advance_checkpoint(checkpoint(3), expected_version=None)
    with pytest.raises(CheckpointConflict, match="already exists at version 3"):
        store.advance_checkpoint(checkpoint(4), expected_version=None)
    assert store.get_checkpoint(NAME).version == 3  # type: ignore[union-attr]


def test_advance_is_compare_and_swap(store: StateStore) -> None:
    store.advance_checkpoint(checkpoint(3), expected_version=None)
    assert store.advance_checkpoint(checkpoint(7), expected_version=3).version == 7
    with pytest.raises(CheckpointConflict, match=r"at version 7, not the expected 3"):
        store.advance_checkpoint(checkpoint(9), expected_version=3)
    assert store.get_checkpoint(NAME).version == 7  # type: ignore[union-attr]


def test_advance_of_a_missing_checkpoint_conflicts(store: StateStore) -> None:
    with pytest.raises(CheckpointConflict, match="no longer exists"):
        store.advance_checkpoint(checkpoint(4), expected_version=3)


def test_same_version_may_be_rewritten(store: StateStore) -> None:
    store.advance_checkpoint(checkpoint(3), expected_version=None)
    stored = store.advance_checkpoint(checkpoint(3, schema_fingerprint="fp-2"), expected_version=3)
    assert stored.schema_fingerprint == "fp-2"


def test_version_never_moves_back_for_the_same_table(store: StateStore) -> None:
    store.advance_checkpoint(checkpoint(10), expected_version=None)
    with pytest.raises(ValueError, match="backwards"):
        store.advance_checkpoint(checkpoint(4), expected_version=10)
    assert store.get_checkpoint(NAME).version == 10  # type: ignore[union-attr]


def test_recreated_table_may_restart_at_a_lower_version(store: StateStore) -> None:
    store.advance_checkpoint(checkpoint(10), expected_version=None)
    stored = store.advance_checkpoint(checkpoint(0, table_id="table-id-2"), expected_version=10)
    assert (stored.version, stored.table_id) == (0, "table-id-2")


def test_an_explicit_rewind_moves_back_but_is_still_compare_and_swap(store: StateStore) -> None:
    store.advance_checkpoint(checkpoint(10), expected_version=None)
    assert store.advance_checkpoint(checkpoint(4), expected_version=10, rewind=True).version == 4
    with pytest.raises(CheckpointConflict):
        store.advance_checkpoint(checkpoint(2), expected_version=10, rewind=True)
    assert store.get_checkpoint(NAME).version == 4  # type: ignore[union-attr]


def test_reset_removes_and_returns_the_checkpoint(store: StateStore) -> None:
    assert store.reset_checkpoint(NAME) is None
    created = store.advance_checkpoint(checkpoint(5), expected_version=None)
    assert store.reset_checkpoint(NAME) == created
    assert store.get_checkpoint(NAME) is None
    store.advance_checkpoint(checkpoint(0), expected_version=None)  # bootstraps again


def test_list_is_sorted_by_name(store: StateStore) -> None:
    for name in ("s.b.z", "s.b.a", "s.b.m"):
        store.advance_checkpoint(checkpoint(1, name=name), expected_version=None)
    assert [c.name for c in store.list_checkpoints()] == ["s.b.a", "s.b.m", "s.b.z"]


def test_timestamps_come_back_as_aware_utc_of_the_same_instant(store: StateStore) -> None:
    cet = timezone(timedelta(hours=1))
    local = datetime(2025, 6, 1, 13, 30, 15, 123456, tzinfo=cet)
    stored = store.advance_checkpoint(checkpoint(1, version_timestamp=local), expected_version=None)
    for value in (stored, store.get_checkpoint(NAME)):
        assert value is not None and value.version_timestamp is not None
        assert value.version_timestamp == local
        assert value.version_timestamp.tzinfo == UTC
        assert value.version_timestamp.microsecond == 123456


def test_missing_version_timestamp_is_allowed(store: StateStore) -> None:
    stored = store.advance_checkpoint(checkpoint(1, version_timestamp=None), expected_version=None)
    assert stored.version_timestamp is None


def test_domain_values_are_frozen_and_validated() -> None:
    value = checkpoint(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.version = 2  # type: ignore[misc]
    with pytest.raises(ValueError, match="timezone-aware"):
        checkpoint(1, version_timestamp=datetime(2025, 1, 1))
    with pytest.raises(ValueError, match=">= 0"):
        checkpoint(-1)


def test_updated_at_comes_from_the_store_clock(clocked_store: StateStore, clock: FakeClock) -> None:
    assert clocked_store.advance_checkpoint(checkpoint(1), expected_version=None).updated_at == clock.now
    clock.advance(60)
    assert clocked_store.advance_checkpoint(checkpoint(2), expected_version=1).updated_at == clock.now


def test_lease_guarded_advance_needs_the_lease_still_held(clocked_store: StateStore, clock: FakeClock) -> None:
    store = clocked_store
    lease = store.acquire_lease(NAME, "worker-a", timedelta(seconds=30))
    store.advance_checkpoint(checkpoint(1), expected_version=None, lease=lease)

    clock.advance(31)  # expired, nobody took over yet: still refused, someone may be about to
    with pytest.raises(LeaseHeld, match="expired"):
        store.advance_checkpoint(checkpoint(2), expected_version=1, lease=lease)

    store.acquire_lease(NAME, "worker-b", timedelta(seconds=30))
    with pytest.raises(LeaseHeld, match="worker-b took it over"):
        store.advance_checkpoint(checkpoint(2), expected_version=1, lease=lease)
    assert store.get_checkpoint(NAME).version == 1  # type: ignore[union-attr]


def test_lease_for_another_table_is_a_programming_error(store: StateStore) -> None:
    lease = store.acquire_lease("other.table.name", "worker-a", timedelta(seconds=30))
    with pytest.raises(ValueError, match="lease is for"):
        store.advance_checkpoint(checkpoint(1), expected_version=None, lease=lease)


def test_the_target_identity_round_trips_and_each_advance_restates_it(store: StateStore) -> None:
    assert (checkpoint(1).target_table_id, checkpoint(1).target_version, checkpoint(1).target_mode) == (None,) * 3
    first = checkpoint(1, target_table_id="delta-id-1", target_version=0, target_mode="merge")
    stored = store.advance_checkpoint(first, expected_version=None)
    assert dataclasses.replace(stored, updated_at=None) == first
    assert store.get_checkpoint(NAME) == stored and store.list_checkpoints() == [stored]

    moved = store.advance_checkpoint(dataclasses.replace(first, version=2, target_version=1), expected_version=1)
    assert (moved.target_table_id, moved.target_version, moved.target_mode) == ("delta-id-1", 1, "merge")
    # A writer that does not know the target's state says so: nothing stale survives it.
    unknown = store.advance_checkpoint(checkpoint(3), expected_version=2)
    assert (unknown.target_table_id, unknown.target_version, unknown.target_mode) == (None, None, None)


def test_a_target_version_is_never_negative() -> None:
    with pytest.raises(ValueError, match="target version must be >= 0"):
        checkpoint(1, target_version=-1)
