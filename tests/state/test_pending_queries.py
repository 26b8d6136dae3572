"""Contract: pending asynchronous queries are recorded, completed with their queryId, and cleared."""

from __future__ import annotations

from sharesync.state import PendingQuery, StateStore, open_store


def test_a_recorded_key_is_read_back_then_gains_its_query_id(store: StateStore) -> None:
    assert store.pending_query("s.sc.t", "req") is None
    key_only = PendingQuery("s.sc.t", "req", idempotency_key="k1", start_version=5, end_version=5)
    stored = store.record_pending_query(key_only)
    assert stored.submitted_at is not None
    assert store.pending_query("s.sc.t", "req") == stored

    store.record_pending_query(PendingQuery("s.sc.t", "req", idempotency_key="k1", query_id="q-1", end_version=5))
    found = store.pending_query("s.sc.t", "req")
    assert found is not None
    assert (found.idempotency_key, found.query_id, found.start_version, found.end_version) == ("k1", "q-1", None, 5)


def test_rows_are_per_table_and_request_and_clearing_one_keeps_the_others(store: StateStore) -> None:
    store.record_pending_query(PendingQuery("s.sc.a", "r1", idempotency_key="ka"))
    store.record_pending_query(PendingQuery("s.sc.a", "r2", idempotency_key="kb"))
    store.record_pending_query(PendingQuery("s.sc.b", "r1", idempotency_key="kc"))
    store.clear_pending_query("s.sc.a", "r1")
    store.clear_pending_query("s.sc.a", "missing")  # nothing to clear is not an error
    assert store.pending_query("s.sc.a", "r1") is None
    assert [
        q.idempotency_key for q in (store.pending_query("s.sc.a", "r2"), store.pending_query("s.sc.b", "r1")) if q
    ] == [
        "kb",
        "kc",
    ]


def test_a_pending_query_survives_reopening_the_store(store_url: str) -> None:
    open_store(store_url).record_pending_query(PendingQuery("s.sc.t", "req", idempotency_key="k", query_id="q"))
    found = open_store(store_url).pending_query("s.sc.t", "req")
    assert found is not None and found.query_id == "q"
