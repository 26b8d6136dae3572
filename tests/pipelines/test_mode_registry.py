"""The built-in modes answer the run's questions as its branches on the mode did (issue 41 item 1)."""

from __future__ import annotations

import pytest

from sharesync.pipelines.modes.registry import BUILTIN_MODES, ModeRegistry, Registered
from sharesync.sync.core.changefeed import CHANGE_COLUMNS
from sharesync.sync.core.config import Mode
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.history_columns import IS_CURRENT, VALID_FROM_VERSION, VALID_TO_VERSION


@pytest.mark.parametrize(
    ("mode", "answers"),
    [
        (Mode.MERGE, (True, True, False, True, True, None, ("_sharesync_version",), None)),
        (Mode.APPEND, (False, False, False, False, False, None, ("_commit_version",), "change log")),
        (Mode.SNAPSHOT, (False, True, False, False, True, None, ("_sharesync_version",), None)),
        (Mode.HISTORY, (False, False, True, True, True, IS_CURRENT, (VALID_FROM_VERSION, VALID_TO_VERSION), "history")),
    ],
)
def test_each_built_in_mode_answers_as_the_run_decided_before(mode: Mode, answers: tuple[object, ...]) -> None:
    s = BUILTIN_MODES.of_mode(mode)
    asked = (s.nets_by_key, s.direct_snapshot, s.dated_snapshot, s.keyed, s.copies_source, s.current_flag)
    assert (*asked, s.high_water_columns, s.keeps) == answers


def test_a_kept_target_s_layout_is_told_by_its_columns() -> None:
    assert BUILTIN_MODES.kept_layout(["id", VALID_FROM_VERSION, *CHANGE_COLUMNS]) is Mode.HISTORY
    assert BUILTIN_MODES.kept_layout(["id", *CHANGE_COLUMNS]) is Mode.APPEND
    assert BUILTIN_MODES.kept_layout(["id", "_sharesync_version"]) is None
    assert BUILTIN_MODES.what_kept(["id", *CHANGE_COLUMNS]) == "its append-mode change log"
    assert BUILTIN_MODES.what_kept(["id"]) == "a merge- or snapshot-mode table"


def test_a_mode_name_is_registered_once() -> None:
    again = Registered(name="merge", follows=Mode.MERGE, strategy=BUILTIN_MODES.of_mode(Mode.MERGE))
    with pytest.raises(ConfigError, match="mode 'merge' is registered already"):
        ModeRegistry([again])
