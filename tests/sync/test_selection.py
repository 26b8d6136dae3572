"""``include:`` patterns: which tables a pass syncs, decided purely from listings and checkpoints (issue 33 §2)."""

from __future__ import annotations

from typing import Any

import pytest

from sharesync.sync.core.config import parse_config
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.include_patterns import expand


def config(*include: dict[str, Any], tables: list[dict[str, Any]] | None = None) -> Any:
    raw = {"profile": "/p.share", "providers": {"b": {"profile": "/b.share"}}, "include": list(include)}
    return parse_config({**raw, "tables": tables or []})


def pattern(pattern: str, **extra: Any) -> dict[str, Any]:
    return {"pattern": pattern, "target": "/w/{provider}/{share}/{schema}/{table}", "keys": ["id"], **extra}


def keys(selection: Any) -> list[str]:
    return [t.key for t in selection.tables]


def test_patterns_match_part_by_part_with_excludes_and_explicit_entries_win() -> None:
    c = config(
        pattern("s.d.*", exclude=["s.d.tmp_*"]),
        pattern("s.*.*", provider="b", mode="append", keys=[]),
        tables=[{"name": "s.d.orders", "target": "/mine", "mode": "snapshot"}],
    )
    listed = {"default": ["s.d.orders", "s.d.items", "s.d.tmp_x", "s.other.t", "t.d.x"], "b": ["s.d.orders"]}
    selection = expand(c.tables, c.include, listed, {})
    assert keys(selection) == ["s.d.orders", "s.d.items", "b/s.d.orders"]
    assert selection.tables[0].target == "/mine"
    items, theirs = selection.tables[1:]
    assert (items.mode.value, items.keys, items.target) == ("merge", ["id"], "/w/default/s/d/items")
    assert (theirs.provider, theirs.mode.value, theirs.target) == ("b", "append", "/w/b/s/d/orders")


def test_a_synced_table_gone_from_the_listing_is_removed_and_a_failed_listing_keeps_it() -> None:
    c = config(pattern("s.d.*"), pattern("s.d.*", provider="b"))
    synced = {"s.d.gone": "merge", "b/s.d.kept": "merge", "s.other.x": "merge"}
    selection = expand(c.tables, c.include, {"default": ["s.d.new"], "b": None}, synced)
    assert keys(selection) == ["s.d.new", "b/s.d.kept"]
    assert [t.key for t in selection.removed] == ["s.d.gone"]  # s.other.x matches no pattern: not ours


def test_keys_apply_where_the_columns_exist_else_the_fallback_mode_else_needs_keys() -> None:
    c = config(pattern("s.k.*"), pattern("s.f.*", fallback_mode="snapshot", soft_delete=True))
    listed = {"default": ["s.k.has", "s.k.lacks", "s.f.lacks"]}
    columns = {"s.k.has": ["ID", "x"], "s.k.lacks": ["x"], "s.f.lacks": ["x"]}
    selection = expand(c.tables, c.include, listed, {}, columns)
    assert [(t.key, t.mode.value, t.keys) for t in selection.tables] == [
        ("s.k.has", "merge", ["id"]),
        ("s.f.lacks", "snapshot", []),
    ]
    assert [(t.key, missing) for t, missing in selection.needs_keys] == [("s.k.lacks", ("id",))]
    # Synced in the fallback mode before: it stays in it, without asking for its columns again.
    again = expand(c.tables, c.include, listed, {"s.f.lacks": "snapshot"})
    assert [t.mode.value for t in again.tables if t.key == "s.f.lacks"] == ["snapshot"]


def test_two_tables_with_one_target_refuse_the_pass() -> None:
    c = config({"pattern": "s.*.*", "target": "/w/{table}", "mode": "append"})
    with pytest.raises(ConfigError, match=r"tables 's.a.t' and 's.b.t' get the same target '/w/t'; add \{provider\}"):
        expand(c.tables, c.include, {"default": ["s.a.t", "s.b.t"]}, {})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (pattern("s.d"), "include[0].pattern: 's.d' must be 'share.schema.table' with '*'"),
        (pattern("s.d.*", target="/w/x"), "include[0].target: must contain {table}"),
        (pattern("s.d.*", target="/w/{tabel}"), "unknown placeholder(s) ['tabel']"),
        (pattern("s.d.*", keys=[]), "mode 'merge' needs 'keys'"),
        (pattern("s.d.*", mode="append", fallback_mode="snapshot"), "'fallback_mode' applies to mode 'merge'"),
        (pattern("s.d.*", fallback_mode="merge"), "include[0].fallback_mode: Input should be 'append' or 'snapshot'"),
        (pattern("s.d.*", provider="nope"), "include[0].provider: 'nope' is not a provider of this config"),
        (pattern("s.d.*", name="s.d.t"), "'name' belongs to 'tables:' entries"),
        (pattern("s.d.*", kyes=["id"]), "include[0]: kyes: unknown field; check the spelling"),
    ],
)
def test_pattern_mistakes_name_the_field_and_the_fix(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config(entry)
    assert message in str(caught.value)
