"""Which strategy syncs a table: the one place that maps a mode to its package.

A :class:`ModeRegistry` is a value, handed to the pass that uses it (``Syncer(modes=...)``);
:data:`BUILTIN_MODES` holds the four modes of docs/modes.md. A mode of one's own is registered
under a name with the built-in mode whose planning and config rules it follows (``follows``:
the planner in :mod:`sharesync.sync.planning` knows the four), and a table is given it by key
(``tables``): its config still says the mode it follows, so config validation is unchanged.
docs/adding-a-mode-or-target-format.md walks through one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from sharesync.pipelines.modes.append.append_mode import AppendMode
from sharesync.pipelines.modes.base import ModeStrategy
from sharesync.pipelines.modes.history.history_mode import HistoryMode
from sharesync.pipelines.modes.merge.merge_mode import MergeMode
from sharesync.pipelines.modes.snapshot.snapshot_mode import SnapshotMode
from sharesync.sync.core.changefeed import CHANGE_COLUMNS
from sharesync.sync.core.config import Mode, SharesyncConfig, TableConfig
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.history_columns import VALID_FROM_VERSION

__all__ = ["BUILTIN_MODES", "ModeRegistry", "Registered"]


@dataclass(frozen=True, kw_only=True)
class Registered:
    """A mode under its name, with the built-in mode whose planning and config rules it follows."""

    name: str
    follows: Mode
    strategy: ModeStrategy


# The columns that tell a kept target's layout (a change log, a row history) from its rows alone.
_LAYOUT_COLUMNS = {Mode.HISTORY: frozenset({VALID_FROM_VERSION}), Mode.APPEND: frozenset(CHANGE_COLUMNS)}

_HELD = {Mode.HISTORY: "its history-mode row history", Mode.APPEND: "its append-mode change log"}

_BUILTIN = (
    Registered(name=Mode.MERGE.value, follows=Mode.MERGE, strategy=MergeMode()),
    Registered(name=Mode.APPEND.value, follows=Mode.APPEND, strategy=AppendMode()),
    Registered(name=Mode.SNAPSHOT.value, follows=Mode.SNAPSHOT, strategy=SnapshotMode()),
    Registered(name=Mode.HISTORY.value, follows=Mode.HISTORY, strategy=HistoryMode()),
)


class ModeRegistry:
    """Modes by name, and the tables given a mode of their own (key → name)."""

    def __init__(self, extra: Iterable[Registered] = (), *, tables: Mapping[str, str] | None = None) -> None:
        modes = {r.name: r for r in _BUILTIN}
        for registered in extra:
            if registered.name in modes:
                raise ConfigError(f"mode '{registered.name}' is registered already; give the new mode another name")
            modes[registered.name] = registered
        self._modes = MappingProxyType(modes)
        self._tables = MappingProxyType(dict(tables or {}))
        unknown = sorted(set(self._tables.values()) - set(modes))
        if unknown:
            raise ConfigError(f"no mode named {unknown} is registered (known: {', '.join(modes)})")

    def check(self, config: SharesyncConfig) -> None:
        """Refuse a table given a mode whose rules its config's ``mode:`` does not follow."""
        for table in config.tables:
            self.registered(table)

    def registered(self, table: TableConfig) -> Registered:
        found = self._modes[self._tables.get(table.key, table.mode.value)]
        if found.follows is not table.mode:
            raise ConfigError(
                f"table '{table.key}' is given mode '{found.name}', which follows mode '{found.follows.value}' "
                f"rules; set 'mode: {found.follows.value}' for it (the config says '{table.mode.value}')"
            )
        return found

    def strategy(self, table: TableConfig) -> ModeStrategy:
        """The strategy that syncs ``table``."""
        return self.registered(table).strategy

    def of_mode(self, mode: Mode | str) -> ModeStrategy:
        """A built-in mode's strategy (a checkpoint records the mode's name)."""
        return self._modes[Mode(mode).value].strategy

    def kept_layout(self, columns: Sequence[str]) -> Mode | None:
        """The mode a table's columns say it was written in when its rows are ones the provider
        cannot give again (a change log, a row history); None otherwise."""
        names = set(columns)
        return next((mode for mode, marks in _LAYOUT_COLUMNS.items() if marks <= names), None)

    def what_kept(self, columns: Sequence[str]) -> str:
        """What a target with ``columns`` held, in words (``sharesync reset --discard-target``)."""
        layout = self.kept_layout(columns)
        return _HELD[layout] if layout is not None else "a merge- or snapshot-mode table"


BUILTIN_MODES = ModeRegistry()
