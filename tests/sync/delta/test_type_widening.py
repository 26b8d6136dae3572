"""Type widening: the protocol's list of widenings, and refusing a recorded change that is not one."""

from __future__ import annotations

from typing import Any

import pytest

from sharesync.sync.core.errors import UnsupportedTableFeature
from sharesync.sync.delta.type_widening import check_type_changes, is_widening

# Delta PROTOCOL.md, "Type Widening": every change it lists ...
WIDENINGS = [
    ("byte", "short"), ("byte", "long"), ("short", "integer"), ("integer", "long"),
    ("float", "double"), ("byte", "double"), ("short", "double"), ("integer", "double"),
    ("date", "timestamp_ntz"),
    ("decimal(6,2)", "decimal(10,4)"), ("decimal(6, 2)", "decimal(8,2)"),
    ("byte", "decimal(10,0)"), ("integer", "decimal(12,2)"), ("long", "decimal(20,0)"), ("long", "decimal(25,5)"),
]  # fmt: skip
# ... and changes it does not: narrowing, lossy, a scale gain without the precision for it, unrelated types.
NOT_WIDENINGS = [
    ("long", "integer"), ("integer", "integer"), ("long", "double"), ("double", "float"), ("integer", "float"),
    ("date", "timestamp"), ("timestamp_ntz", "date"), ("string", "long"), ("integer", "string"),
    ("decimal(10,4)", "decimal(6,2)"), ("decimal(6,2)", "decimal(7,4)"), ("decimal(6,2)", "decimal(6,2)"),
    ("integer", "decimal(9,0)"), ("integer", "decimal(11,2)"), ("long", "decimal(19,0)"),
]  # fmt: skip


@pytest.mark.parametrize(("source", "target"), WIDENINGS)
def test_the_protocols_widenings(source: str, target: str) -> None:
    assert is_widening(source, target)


@pytest.mark.parametrize(("source", "target"), NOT_WIDENINGS)
def test_other_changes_are_not_widenings(source: str, target: str) -> None:
    assert not is_widening(source, target)


def _field(name: str, kind: Any, *changes: dict[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "type": kind,
        "nullable": True,
        "metadata": {"delta.typeChanges": list(changes)} if changes else {},
    }


def test_recorded_widenings_pass_nested_ones_too() -> None:
    nested = {"type": "struct", "fields": [_field("n", "long", {"fromType": "short", "toType": "integer"},
                                                  {"fromType": "integer", "toType": "long"})]}  # fmt: skip
    mapped = {"type": "map", "keyType": "double", "valueType": nested, "valueContainsNull": True}
    schema = {"type": "struct", "fields": [
        _field("id", "long"),
        _field("day", "timestamp_ntz", {"fromType": "date", "toType": "timestamp_ntz"}),
        _field("m", mapped, {"fromType": "float", "toType": "double", "fieldPath": "key"}),
    ]}  # fmt: skip
    check_type_changes(schema, table="s.t.x")


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"fromType": "long", "toType": "integer"}, "from 'long' to 'integer'"),
        ({"fromType": "integer", "toType": "string"}, "from 'integer' to 'string'"),
        ({"toType": "long"}, "from None to 'long'"),
    ],
)
def test_a_recorded_change_that_is_no_widening_is_refused_by_name(change: dict[str, str], shown: str) -> None:
    inner = {"type": "struct", "fields": [_field("qty", "long", change)]}
    schema = {"type": "struct", "fields": [_field("id", "long"), _field("order", inner)]}
    with pytest.raises(
        UnsupportedTableFeature, match=rf"table s\.t\.x records a type change of column 'order\.qty' {shown}"
    ):
        check_type_changes(schema, table="s.t.x")
