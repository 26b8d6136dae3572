"""The pure rule that says when a target is worth compacting."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from sharesync.pipelines.targets.health import MIB, TargetHealth, Thresholds, compaction_reason, needs_compaction

HEALTHY = TargetHealth(
    version=7,
    files=4,
    bytes=512 * MIB,
    small_files=0,
    rows=1_000_000,
    deleted_rows=0,
    files_with_deletion_vectors=0,
    last_compaction=None,
)
LIMITS = Thresholds(deleted_ratio=0.1, files=100, small_files=10)


def test_a_healthy_target_is_left_alone() -> None:
    assert compaction_reason(HEALTHY, LIMITS) is None
    assert not needs_compaction(HEALTHY, LIMITS)


def test_rows_hidden_by_deletion_vectors_call_for_compaction_at_the_ratio() -> None:
    below = replace(HEALTHY, deleted_rows=99_999, files_with_deletion_vectors=3)
    at = replace(below, deleted_rows=100_000)
    assert not needs_compaction(below, LIMITS)
    assert compaction_reason(at, LIMITS) == "10.0% of its rows are deleted by deletion vectors (threshold 10%)"
    # One file with deletion vectors still needs rewriting: readers skip its rows
    assert needs_compaction(replace(at, files=1), LIMITS)


def test_small_files_and_many_files_call_for_compaction() -> None:
    assert compaction_reason(replace(HEALTHY, files=12, small_files=10), LIMITS) == "10 small files (threshold 10)"
    assert not needs_compaction(replace(HEALTHY, files=12, small_files=9), LIMITS)
    assert compaction_reason(replace(HEALTHY, files=100), LIMITS) == "100 files (threshold 100)"
    assert not needs_compaction(replace(HEALTHY, files=99), LIMITS)


def test_one_file_is_never_compacted_for_its_size() -> None:
    one_small = replace(HEALTHY, files=1, small_files=1)
    assert not needs_compaction(one_small, Thresholds(small_files=1, files=1))
    empty = replace(HEALTHY, files=0, bytes=0, rows=0)
    assert not needs_compaction(empty, Thresholds(small_files=0, files=0))
    assert empty.deleted_ratio == 0.0


def test_the_description_names_what_the_rule_reads() -> None:
    health = replace(
        HEALTHY, deleted_rows=250_000, small_files=2, last_compaction=datetime(2026, 11, 28, 15, 0, tzinfo=UTC)
    )
    assert health.live_rows == 750_000
    assert health.describe() == (
        "4 files (2 small), 512.0 MiB, 750000 rows, 250000 deleted by deletion vectors (25.0%), "
        "last compacted 2026-11-28T15:00:00+00:00"
    )
