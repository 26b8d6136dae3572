"""``mode: history`` and its options: every bad input is a ConfigError naming the field and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from sharesync.sync.core.config import Mode, SharesyncConfig, check_tracked_columns, parse_config
from sharesync.sync.core.errors import ConfigError


def config(**table: Any) -> SharesyncConfig:
    entry = {"name": "s.c.t", "target": "/tmp/t", "mode": "history", "keys": ["id"], **table}
    return parse_config({"profile": "p.share", "tables": [entry]})


def test_a_history_table_with_its_options() -> None:
    table = config(track_history=["name"], merge_strategy="rewrite").tables[0]
    assert (table.mode, table.track_history, table.track_history_except) == (Mode.HISTORY, ["name"], None)
    assert config().tables[0].track_history is None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"keys": []}, "tables[0]: mode 'history' needs 'keys'"),
        ({"track_history": ["a"], "track_history_except": ["b"]}, "exclude each other; keep one"),
        ({"track_history_except": ["ID"]}, "'track_history_except' lists the key column(s) ['ID']; keys are always"),
        ({"track_history": ["_sharesync_is_current"]}, "names sharesync's own column(s)"),
        ({"track_history_except": ["_sharesync_valid_from"]}, "names sharesync's own column(s)"),
        ({"track_history": ["a", "a"]}, "tables[0].track_history: lists a column twice"),
        ({"columns": ["a"], "track_history": ["b"]}, "'track_history' names ['b'], which 'columns' leaves out"),
        ({"mode": "merge", "track_history": ["a"]}, "'track_history' only applies to mode 'history'"),
        ({"mode": "append", "keys": [], "track_history_except": ["a"]}, "only applies to mode 'history'"),
        ({"soft_delete": True}, "'soft_delete' only applies to mode 'merge'"),
    ],
)
def test_bad_history_options_name_the_field_and_the_fix(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        config(**table)
    assert message in str(failure.value)


def test_tracked_columns_are_checked_against_the_shared_schema() -> None:
    names = ["id", "Name", "score"]
    check_tracked_columns(config(track_history=["name"]).tables[0], names)  # names match in any case
    check_tracked_columns(config().tables[0], names)
    with pytest.raises(ConfigError, match=r"tables\[s.c.t\].track_history_except: \['colour'\] not in the shared"):
        check_tracked_columns(config(track_history_except=["colour"]).tables[0], names, version=3)
    with pytest.raises(ConfigError, match="at version 3 .*fix 'track_history' in the config"):
        check_tracked_columns(config(track_history=["colour", "name"]).tables[0], names, version=3)
