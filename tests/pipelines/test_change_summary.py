"""One per-mode change summary: in words (logs, Dagster) and compact (the CLI's results table)."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from sharesync.pipelines.modes.append.append_mode import AppendChanges
from sharesync.pipelines.modes.base import TargetChanges
from sharesync.pipelines.modes.history.history_mode import HistoryChanges
from sharesync.pipelines.modes.merge.merge_mode import MergeChanges
from sharesync.pipelines.modes.snapshot.snapshot_mode import SnapshotChanges
from sharesync.sync.core.changefeed import ChangeType

APPENDED = MappingProxyType({ChangeType.INSERT: 3, ChangeType.UPDATE_PREIMAGE: 1, ChangeType.UPDATE_POSTIMAGE: 1})


@pytest.mark.parametrize(
    ("changes", "words", "compact"),
    [
        (MergeChanges(inserted=1, updated=2, deleted=3), "1 keys inserted, 2 updated, 3 deleted", "+1 ~2 -3 keys"),
        (
            AppendChanges(appended=APPENDED),
            "5 change rows appended (3 insert, 1 update_preimage, 1 update_postimage, 0 delete)",
            "5 rows appended\n3 ins 2 upd",
        ),
        (
            AppendChanges(),
            "0 change rows appended (0 insert, 0 update_preimage, 0 update_postimage, 0 delete)",
            "0 rows appended",
        ),
        (SnapshotChanges(written=7), "7 rows written", "7 rows written"),
        (HistoryChanges(deleted=1, opened=4, closed=2), "4 rows opened, 2 closed, 1 removed", "4 opened\n2 closed"),
    ],
)
def test_each_mode_is_summed_up_in_words_and_compactly(changes: TargetChanges, words: str, compact: str) -> None:
    assert changes.describe() == words
    assert changes.describe(compact=True) == compact
