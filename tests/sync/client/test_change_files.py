"""The per-version change rule, with deletion vectors (as Delta's ``CDCReader.getDeletedAndAddedRows``)."""

from __future__ import annotations

from typing import Any

from sharesync.sync.core.changefeed import ChangeType
from sharesync.sync.delta.properties import DeletionVectorDescriptor
from sharesync.sync.protocol.changes import EVERY_ROW, RowSelection, select_change_files, snapshot_files
from sharesync.sync.protocol.wire import AddFile, CdfFile, File, RemoveFile

INSERT, DELETE = ChangeType.INSERT, ChangeType.DELETE


def dv(name: str, offset: int = 1) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("p", f"https://bucket/{name}.bin?sig={offset}", 34, 1, offset)


def action(kind: type[Any], file_id: str, version: int, dv_name: str | None = None, **extra: Any) -> Any:
    url = f"https://bucket/{file_id}.parquet?sig={kind.__name__}"  # the same file, another URL per action
    dv_fields = {"deletion_vector": dv(dv_name), "deletion_vector_file_id": dv_name} if dv_name else {}
    return kind(url=url, id=file_id, size=10, version=version, timestamp=version * 1000, **dv_fields, **extra)


def summary(actions: list[Any]) -> list[tuple[Any, ...]]:
    out = []
    for c in select_change_files(actions):
        rows = c.rows
        out.append((c.commit_version, c.change_type, c.id, type(c.file).__name__,
                    rows.within.deletion_vector_file_id if rows.within else None,
                    rows.without.deletion_vector_file_id if rows.without else None))  # fmt: skip
    return out


def test_a_dv_delete_is_the_rows_the_new_dv_adds() -> None:
    # Sail's DELETE on a DV table: remove(f) and add(f, dv1) in one version.
    changes = summary([action(RemoveFile, "f", 2), action(AddFile, "f", 2, "dv1")])
    assert changes == [(2, DELETE, "f", "AddFile", "dv1", None)]


def test_a_second_dv_delete_is_new_dv_minus_old_dv() -> None:
    changes = summary([action(RemoveFile, "f", 3, "dv1"), action(AddFile, "f", 3, "dv2")])
    # Deleted: in dv2, not in dv1. Restored (a DV that shrank): in dv1, not in dv2. One download.
    assert changes == [(3, DELETE, "f", "AddFile", "dv2", "dv1"), (3, INSERT, "f", "AddFile", "dv1", "dv2")]


def test_a_dv_cleared_restores_its_rows() -> None:
    assert summary([action(RemoveFile, "f", 4, "dv1"), action(AddFile, "f", 4)]) == [
        (4, INSERT, "f", "AddFile", "dv1", None)
    ]


def test_the_same_dv_committed_again_changes_nothing() -> None:
    same = [action(RemoveFile, "f", 5, "dv1"), action(AddFile, "f", 5, "dv1")]
    assert summary(same) == []
    assert summary([action(RemoveFile, "f", 5), action(AddFile, "f", 5)]) == []


def test_unmatched_files_are_whole_logical_files() -> None:
    changes = summary(
        [action(AddFile, "new", 6), action(RemoveFile, "gone", 6, "dv1"), action(AddFile, "old", 6, "dv2")]
    )
    assert changes == [
        (6, INSERT, "new", "AddFile", None, None),
        (6, DELETE, "gone", "RemoveFile", None, "dv1"),  # its rows minus those its DV already deleted
        (6, INSERT, "old", "AddFile", None, "dv2"),
    ]


def test_cdc_files_win_and_data_change_false_is_skipped() -> None:
    cdc = CdfFile(url="u", id="c", size=1, version=7, timestamp=7)
    assert summary([action(RemoveFile, "f", 7), action(AddFile, "f", 7, "dv1"), cdc]) == [
        (7, None, "c", "CdfFile", None, None)
    ]
    # As Delta logs it (and the delta response format passes it on), a cdc action says
    # dataChange false: it is still the version's change data, never skipped.
    logged = CdfFile(url="u", id="c", size=1, version=7, timestamp=7, dataChange=False)
    assert summary([action(RemoveFile, "f", 7), action(AddFile, "g", 7), logged]) == [
        (7, None, "c", "CdfFile", None, None)
    ]
    # A DV purge or compaction: dataChange false, no row changed.
    purge = [action(RemoveFile, "f", 8, "dv1", data_change=False), action(AddFile, "g", 8, data_change=False)]
    assert summary(purge) == []


def test_versions_come_out_in_order() -> None:
    changes = summary([action(AddFile, "b", 9), action(AddFile, "a", 1)])
    assert [c[0] for c in changes] == [1, 9]


def test_a_snapshot_file_with_a_dv_is_its_rows_outside_the_dv() -> None:
    plain = File(url="u", id="a", size=1)
    deleted = File(url="u", id="b", size=1, deletion_vector=dv("x"))
    a, b = snapshot_files([plain, deleted], 3)
    assert a.rows is EVERY_ROW and b.rows == RowSelection(without=deleted)
    assert (b.change_type, b.commit_version) == (INSERT, 3)
