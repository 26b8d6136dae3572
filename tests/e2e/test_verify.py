"""The oracle bites: each check fails on a target that is one row or one value off."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from support.e2e import Workspace
from support.verify import (
    assert_append_target_matches,
    assert_merge_target_matches,
    assert_snapshot_target_matches,
    source_version,
)

from sharesync.pipelines.targets.delta.rows import read_rows


def _corrupt(target: str, tmp: Path, name: str, damage: Callable[[DeltaTable], object]) -> str:
    copy = tmp / name
    shutil.copytree(target, copy)
    damage(DeltaTable(str(copy)))
    return str(copy)


def _duplicate_one_row(dt: DeltaTable) -> None:
    write_deltalake(dt.table_uri, read_rows(dt).slice(0, 1), mode="append")


def test_checks_fail_on_a_target_one_row_or_value_off(workspace: Workspace, tmp_path: Path) -> None:
    for table in ("m", "a", "s"):
        workspace.table(table, rows=12, seed=3)
        workspace.commit(table, 3, seed=4)
    config = workspace.config(
        workspace.spec("m"), workspace.spec("a", "append", start={"version": 0}), workspace.spec("s", "snapshot")
    )
    workspace.syncer(config).sync_all()
    m, a, s = (workspace.path(t) for t in ("m", "a", "s"))
    version = source_version(m)
    assert_merge_target_matches(m, workspace.target("m"), ["id"], version)
    assert_append_target_matches(a, workspace.target("a"), bootstrap_version=0, end_version=source_version(a))
    assert_snapshot_target_matches(s, workspace.target("s"), source_version(s))
    some_id = read_rows(DeltaTable(workspace.target("m")))["id"][0].as_py()

    damages: dict[str, Callable[[DeltaTable], object]] = {
        "deleted": lambda dt: dt.delete(f"id = {some_id}"),
        "changed": lambda dt: dt.update(updates={"small": "coalesce(small, 0) + 1"}, predicate=f"id = {some_id}"),
        "nulled": lambda dt: dt.update(
            updates={"payload": "null", "amount": "null", "day": "null"}, predicate=f"id = {some_id}"
        ),
        "duplicated": _duplicate_one_row,
    }
    for kind, damage in damages.items():
        bad = _corrupt(workspace.target("m"), tmp_path, f"m-{kind}", damage)
        with pytest.raises(AssertionError):
            assert_merge_target_matches(m, bad, ["id"], version)
        bad = _corrupt(workspace.target("s"), tmp_path, f"s-{kind}", damage)
        with pytest.raises(AssertionError):
            assert_snapshot_target_matches(s, bad, source_version(s))
    bad = _corrupt(workspace.target("a"), tmp_path, "a-duplicated", _duplicate_one_row)
    with pytest.raises(AssertionError):
        assert_append_target_matches(a, bad, bootstrap_version=0, end_version=source_version(a))
    with pytest.raises(AssertionError):  # the last version's changes are expected but absent
        assert_append_target_matches(
            a, workspace.target("a"), bootstrap_version=0, end_version=source_version(a) + 0, changes_from=0
        )
    with pytest.raises(AssertionError):  # an older snapshot is not what the target holds
        assert_merge_target_matches(m, workspace.target("m"), ["id"], version - 1)


def test_type_drift_is_a_failure(workspace: Workspace, tmp_path: Path) -> None:
    workspace.table("s", rows=5, partitioned=False)
    workspace.syncer(workspace.config(workspace.spec("s", "snapshot"))).sync_all()
    dt = DeltaTable(workspace.target("s"))
    widened = read_rows(dt)
    widened = widened.set_column(widened.schema.get_field_index("small"), "small", widened["small"].cast(pa.int32()))
    copy = tmp_path / "widened"
    write_deltalake(str(copy), widened)
    with pytest.raises(AssertionError, match="types differ"):
        assert_snapshot_target_matches(workspace.path("s"), str(copy), 0)
