"""on_new_column and on_breaking_change as decisions: pure, no engine, no target."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharesync.pipelines.run.schema_policy import judge_new_columns, rebuild_change
from sharesync.sync.core.config import TableConfig
from sharesync.sync.core.errors import ConfigError, SchemaIncompatible
from sharesync.sync.core.table_config import BreakingChangePolicy, NewColumnPolicy


def table(**extra: Any) -> TableConfig:
    return TableConfig.model_validate({"name": "s.d.t", "target": "/t", "keys": ["id"], **extra})


TARGET = ["id", "qty", "_sharesync_version", "_sharesync_timestamp"]  # sharesync's own columns never count
SOURCE = ["id", "Note", "qty", "extra"]


def test_defaults_are_todays_behaviour() -> None:
    assert (table().on_new_column, table().on_breaking_change) == (NewColumnPolicy.ADD, BreakingChangePolicy.FAIL)
    assert judge_new_columns(table(), SOURCE, TARGET).table == table()


def test_ignore_keeps_the_targets_columns_and_warns() -> None:
    decided = judge_new_columns(table(on_new_column="ignore"), SOURCE, TARGET)
    assert decided.table.columns == ["qty"]  # keys are always kept, so not listed
    assert decided.warning is not None and "['Note', 'extra']" in decided.warning and "ignore" in decided.warning


def test_ignore_says_it_once_a_column_known_at_the_checkpoint_is_no_news() -> None:
    ignoring = table(on_new_column="ignore")
    later = judge_new_columns(ignoring, SOURCE, TARGET, known=["ID", "note", "qty"])
    assert later.table.columns == ["qty"]  # still left out of every batch
    assert later.warning is not None and "['extra']" in later.warning  # 'extra' is new since the checkpoint
    quiet = judge_new_columns(ignoring, SOURCE, TARGET, known=SOURCE)
    assert quiet.table.columns == ["qty"] and quiet.warning is None


def test_fail_stops_naming_the_new_columns_and_the_fix() -> None:
    with pytest.raises(SchemaIncompatible) as exc:
        judge_new_columns(table(on_new_column="fail"), SOURCE, TARGET)
    assert "['Note', 'extra']" in str(exc.value) and "on_new_column" in str(exc.value)
    assert exc.value.change is None  # not a breaking change: on_breaking_change: rebuild does not answer it


@pytest.mark.parametrize("policy", ["ignore", "fail"])
def test_nothing_to_decide_without_a_target_or_a_new_column(policy: str) -> None:
    assert judge_new_columns(table(on_new_column=policy), SOURCE, None).warning is None
    assert judge_new_columns(table(on_new_column=policy), ["ID", "QTY"], TARGET).warning is None


def test_fixed_columns_take_no_new_column_so_a_policy_for_them_is_refused() -> None:
    fixed = table(columns=["qty"])
    assert judge_new_columns(fixed, SOURCE, TARGET).table is fixed
    with pytest.raises(ValueError, match="'on_new_column: ignore' has no effect with 'columns'"):
        table(on_new_column="ignore", columns=["qty"])


@given(
    source=st.lists(st.sampled_from(["id", "a", "B", "c", "d"]), unique_by=str.lower, min_size=1),
    target=st.lists(st.sampled_from(["id", "A", "b", "c", "e"]), unique=True),
)
def test_ignore_never_writes_a_column_the_target_lacks(source: list[str], target: list[str]) -> None:
    decided = judge_new_columns(table(on_new_column="ignore"), source, target)
    kept = decided.table.columns
    written = {c.lower() for c in (source if kept is None else kept)}
    assert written <= {c.lower() for c in target} | {"id"}
    assert (decided.warning is None) == ({c.lower() for c in source} <= {c.lower() for c in target})


def test_rebuild_answers_only_a_change_at_the_provider() -> None:
    change = SchemaIncompatible("breaking", change="column 'qty' is missing from the new data")
    other = SchemaIncompatible("key column(s) ['id'] are missing")
    assert rebuild_change(table(on_breaking_change="rebuild"), change) == "column 'qty' is missing from the new data"
    assert rebuild_change(table(on_breaking_change="rebuild"), other) is None
    assert rebuild_change(table(), change) is None


@pytest.mark.parametrize(("field", "value"), [("on_new_column", "drop"), ("on_breaking_change", "reset")])
def test_an_unknown_policy_is_a_config_error_naming_the_choices(field: str, value: str) -> None:
    from sharesync.sync.core.config import parse_config

    raw = {"profile": "p.share", "tables": [{"name": "s.d.t", "target": "/t", "keys": ["id"], field: value}]}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw)
    assert field in str(exc.value)
