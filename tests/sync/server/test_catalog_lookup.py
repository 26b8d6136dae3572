"""Resolving a table's name: case-insensitive, directories only, hidden names never — without
listing the schema with a ``stat`` per entry (every table request resolves its name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharesync.sync.server.catalog import Catalog


def _table(base: Path, name: str) -> None:
    (base / name / "_delta_log").mkdir(parents=True)


def test_a_table_is_found_by_any_case_and_keeps_its_own(tmp_path: Path) -> None:
    base = tmp_path / "share" / "sch"
    _table(base, "Orders")
    for i in range(50):
        (base / f"t{i:03d}").symlink_to(base / "Orders", target_is_directory=True)

    found = Catalog(tmp_path).table("SHARE", "Sch", "orders")

    assert (found.share, found.schema, found.name, found.path) == ("share", "sch", "Orders", base / "Orders")


def test_a_file_or_hidden_directory_of_that_name_is_not_a_table(tmp_path: Path) -> None:
    base = tmp_path / "share" / "sch"
    base.mkdir(parents=True)
    (base / "ORDERS").write_text("not a table")
    _table(base, "_orders")
    with pytest.raises(Exception, match="does not exist"):
        Catalog(tmp_path).table("share", "sch", "orders")
    with pytest.raises(Exception, match="does not exist"):
        Catalog(tmp_path).table("share", "sch", "_orders")

    _table(base, "orders")
    assert Catalog(tmp_path).table("share", "sch", "Orders").name == "orders"
