"""A batch whose keys no target file can hold (its statistics say so) is appended, not MERGEd.

Providers that add rows under growing keys send batches of inserts above everything the target
holds: a MERGE would read the whole target to find no match. The job appends those rows instead —
the same rows, one commit that reads nothing of the target — and MERGEs as before the moment one
key of the batch may be in a file. Deletes of keys the target never held change nothing either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.engines import SAIL, SPARK
from support.jobs import StageFn, apply_merge, data_rows, delete, ins, post, pre

pytestmark = pytest.mark.slow


def r(id: int, score: int = 0) -> dict[str, Any]:
    return {"id": id, "name": f"n{id}", "score": score}


def _commits(target: str) -> int:
    return len(list((Path(target) / "_delta_log").glob("*.json")))


def _last_operation(target: str) -> str:
    last = sorted((Path(target) / "_delta_log").glob("*.json"))[-1]
    infos = [json.loads(line)["commitInfo"] for line in last.read_text().splitlines() if '"commitInfo"' in line]
    return str(infos[0]["operation"])


@pytest.mark.parametrize("engine", [SAIL, SPARK], indirect=True)
def test_keys_above_the_target_are_appended_and_a_key_inside_is_merged(
    spark: Any, stage: StageFn, target: str
) -> None:
    apply_merge(spark, stage([ins(1, **r(i)) for i in range(100, 200)]), target, keys=["id"], rewrite_threshold=None)
    expected = {i: r(i) for i in range(100, 200)}

    above = [*(ins(2, **r(i)) for i in range(200, 260)), delete(2, **r(900))]  # 900: never in the target
    appended = apply_merge(spark, stage(above), target, keys=["id"], rewrite_threshold=None)
    expected |= {i: r(i) for i in range(200, 260)}

    assert _last_operation(target) == "WRITE"  # an append: no MERGE, no file of the target read or replaced
    assert (appended.inserted, appended.updated, appended.deleted) == (60, 0, 0)
    assert data_rows(target) == [expected[k] for k in sorted(expected)]

    below = [ins(3, **r(i)) for i in range(0, 10)]  # under every key the target holds
    apply_merge(spark, stage(below), target, keys=["id"], rewrite_threshold=None)
    expected |= {i: r(i) for i in range(0, 10)}
    assert _last_operation(target) == "WRITE"

    inside = [ins(4, **r(300)), pre(4, **r(150)), post(4, **r(150, 7))]  # 150 may be in a file: MERGE
    merged = apply_merge(spark, stage(inside), target, keys=["id"], rewrite_threshold=None)
    expected |= {300: r(300), 150: r(150, 7)}

    assert _last_operation(target) == "MERGE"
    assert (merged.inserted, merged.updated) == (1, 1)
    assert data_rows(target) == [expected[k] for k in sorted(expected)]


@pytest.mark.parametrize("engine", [SAIL], indirect=True)
def test_a_replayed_batch_of_new_keys_is_merged_and_writes_nothing_twice(
    spark: Any, stage: StageFn, target: str
) -> None:
    """After a crash between the append and the checkpoint, the same batch comes again: its keys
    are in the target now, so it MERGEs, and the guard versions keep every row once."""
    apply_merge(spark, stage([ins(1, **r(i)) for i in range(0, 50)]), target, keys=["id"], rewrite_threshold=None)
    batch = stage([ins(2, **r(i, 1)) for i in range(50, 80)])
    apply_merge(spark, batch, target, keys=["id"], rewrite_threshold=None)
    appended = _commits(target)
    assert _last_operation(target) == "WRITE"
    again = apply_merge(spark, batch, target, keys=["id"], rewrite_threshold=None)
    # its keys are in a file now: a MERGE, which changes no row (Sail then commits nothing)
    assert _commits(target) == appended or _last_operation(target) == "MERGE"
    assert (again.inserted, again.updated) == (0, 0)
    assert data_rows(target) == [r(i) for i in range(50)] + [r(i, 1) for i in range(50, 80)]
