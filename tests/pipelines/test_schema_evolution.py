"""check_schema is pure: additive changes are returned, breaking ones raise with the fix."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharesync.pipelines.targets.schema_evolution import check_schema, fields_of
from sharesync.sync.core.errors import SchemaIncompatible


def struct(*fields: tuple[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]}


def test_same_schema_is_no_change() -> None:
    schema = fields_of(struct(("id", "long"), ("name", "string")))
    change = check_schema(schema, schema)
    assert not change.is_additive and change.added == ()


def test_new_columns_are_additive_in_source_order() -> None:
    target = fields_of(struct(("id", "long")))
    source = fields_of(struct(("b", "string"), ("id", "long"), ("a", "decimal(10,2)")))
    change = check_schema(target, source)
    assert change.is_additive
    assert change.added == (("b", "string"), ("a", "decimal(10,2)"))
    assert change.added_names == ("b", "a")


def test_dropped_column_is_breaking_and_says_what_to_do() -> None:
    target = fields_of(struct(("id", "long"), ("gone", "string"), ("also", "int")))
    with pytest.raises(SchemaIncompatible) as exc:
        check_schema(target, fields_of(struct(("id", "long"))), where="target '/t'")
    message = str(exc.value)
    assert "'gone'" in message and "'also'" in message and "/t" in message
    assert "sharesync reset" in message and "Nothing was written" in message


@pytest.mark.parametrize(
    ("old", "new"),
    [("long", "integer"), ("decimal(12,2)", "decimal(10,2)"), ("timestamp", "timestamp_ntz"), ("string", "binary"),
     ("timestamp_ntz", "date"), ("long", "double")],
)  # fmt: skip
def test_a_changed_type_other_than_a_widening_is_breaking(old: str, new: str) -> None:
    with pytest.raises(SchemaIncompatible, match=re.escape(f"'v' changed type {old} -> {new}")):
        check_schema(fields_of(struct(("v", old))), fields_of(struct(("v", new))))


@pytest.mark.parametrize(
    ("old", "new"),
    [("integer", "long"), ("short", "integer"), ("decimal(10,2)", "decimal(12,2)"), ("date", "timestamp_ntz"),
     ("float", "double")],
)  # fmt: skip
def test_a_widened_type_widens_the_target_column(old: str, new: str) -> None:
    """The provider widened the column (Delta type widening): every old value fits the new type."""
    change = check_schema(fields_of(struct(("id", "long"), ("V", old))), fields_of(struct(("id", "long"), ("v", new))))
    assert change.widened == (("V", new),) and change.added == ()


def test_names_compare_case_insensitively() -> None:
    change = check_schema(fields_of(struct(("ID", "long"))), fields_of(struct(("id", "long"))))
    assert change.added == ()


def test_nested_metadata_and_nullability_do_not_matter_but_nested_fields_do() -> None:
    inner = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": False, "metadata": {"k": 1}}]}
    same = {"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}]}
    wider = {"type": "struct", "fields": [*same["fields"], {"name": "y", "type": "long", "nullable": True}]}
    assert check_schema(fields_of(struct(("s", inner))), fields_of(struct(("s", same)))).added == ()
    with pytest.raises(SchemaIncompatible, match="'s' changed type"):
        check_schema(fields_of(struct(("s", inner))), fields_of(struct(("s", wider))))


def test_fields_of_excludes_named_columns() -> None:
    schema = struct(("id", "long"), ("_sharesync_version", "long"))
    assert fields_of(schema, exclude=["_SHARESYNC_VERSION"]) == {"id": "long"}


names = st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=8)


@given(names, st.data())
def test_additive_change_is_exactly_the_missing_columns(source: list[str], data: st.DataObject) -> None:
    kept = data.draw(st.lists(st.sampled_from(source), unique=True) if source else st.just([]))
    target = {n: "long" for n in kept}
    change = check_schema(target, {n: "long" for n in source})
    assert change.added_names == tuple(n for n in source if n not in kept)


def test_a_breaking_change_names_what_changed_for_a_rebuild() -> None:
    target = fields_of(struct(("id", "long"), ("gone", "string"), ("small", "short")))
    source = fields_of(struct(("id", "long"), ("small", "string"), ("fresh", "int")))
    with pytest.raises(SchemaIncompatible) as exc:
        check_schema(target, source)
    assert exc.value.change == "column 'gone' is missing from the new data; column 'small' changed type short -> string"
    assert "on_breaking_change: rebuild" in str(exc.value)
