"""``include:``: tables selected by pattern, followed as a provider adds and removes them (pure).

Delta Sharing carries no primary keys, and a provider adds tables to a share without telling
anyone, so a config that lists every table by hand is stale the day a table appears. An
``include:`` entry names a pattern (``share.schema.*``, ``share.*.*``, ``exclude:``), a target
template and the table settings to use; each pass lists the selected shares and turns every
matching table into an ordinary :class:`TableConfig` (:func:`expand`). An explicit ``tables:``
entry for the same table wins. What the pass does with the result — bootstrap a new table,
report one gone from its share as ``removed at provider`` — is the run's; the decisions are here.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.providers import DEFAULT_PROVIDER, table_key
from sharesync.sync.core.table_config import Mode, TableConfig

TEMPLATE_FIELDS = ("provider", "share", "schema", "table")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_KEYED = (Mode.MERGE, Mode.HISTORY)


def _pattern(value: str) -> str:
    parts = value.split(".")
    if len(parts) != 3 or not all(p.strip() for p in parts):
        raise ValueError(f"'{value}' must be 'share.schema.table' with '*' for any name, e.g. 'sales.*.*'")
    return value


class IncludeConfig(BaseModel):
    """One ``include:`` entry: the pattern, its exclusions, the target template, and any table
    setting (``mode``, ``keys``, ``where``, …) for the tables it selects."""

    model_config = ConfigDict(frozen=True, extra="allow")  # the extras are table settings, checked below

    pattern: str = Field(description="share.schema.table with '*' / '?' wildcards, e.g. 'sales.*.*'")
    provider: str = DEFAULT_PROVIDER
    exclude: list[str] = Field(default_factory=list, description="patterns of tables to leave out")
    target: str = Field(min_length=1, description="template: {provider} {share} {schema} {table}")
    fallback_mode: Literal["append", "snapshot"] | None = Field(
        default=None, description="mode of a matched table that lacks the pattern's keys (None: 'needs keys')"
    )

    @field_validator("pattern")
    @classmethod
    def _check_pattern(cls, value: str) -> str:
        return _pattern(value)

    @field_validator("exclude")
    @classmethod
    def _excludes(cls, value: list[str]) -> list[str]:
        return [_pattern(v) for v in value]

    @field_validator("target")
    @classmethod
    def _template(cls, value: str) -> str:
        unknown = [f for f in _PLACEHOLDER.findall(value) if f not in TEMPLATE_FIELDS]
        if unknown:
            raise ValueError(f"unknown placeholder(s) {unknown}; use {{provider}} {{share}} {{schema}} {{table}}")
        if "{table}" not in value:
            raise ValueError("must contain {table} (every matched table needs its own target)")
        return value

    @model_validator(mode="after")
    def _settings(self) -> IncludeConfig:
        """The table settings are those of ``tables:`` entries, checked by the same rules now."""
        if "name" in self.settings():
            raise ValueError("'name' belongs to 'tables:' entries; a pattern names its tables with 'pattern'")
        self.table_config("s.s.t")
        if self.fallback_mode is not None and Mode(self.settings().get("mode", Mode.MERGE)) not in _KEYED:
            raise ValueError("'fallback_mode' applies to mode 'merge' or 'history' (the modes that need keys)")
        return self

    def settings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})

    def table_config(self, name: str) -> TableConfig:
        """The ``tables:`` entry this pattern means for the shared table ``name``."""
        share, schema, table = name.split(".")
        target = self.target.format(provider=self.provider, share=share, schema=schema, table=table)
        raw = {**self.settings(), "name": name, "target": target, "provider": self.provider}
        try:
            return TableConfig.model_validate(raw)
        except ValidationError as exc:
            error = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown field; check the spelling (see docs/configuration.md)"
            raise ValueError(f"{where + ': ' if where else ''}{message}") from None

    def matches(self, name: str) -> bool:
        return _match(self.pattern, name) and not any(_match(e, name) for e in self.exclude)

    @property
    def share(self) -> str:
        """The share part of the pattern (wildcards included)."""
        return self.pattern.split(".")[0]


def _match(pattern: str, name: str) -> bool:
    """Part by part (a ``*`` never spans a dot), case-insensitive as the protocol's names are."""
    return all(
        fnmatch.fnmatchcase(n.lower(), p.lower()) for p, n in zip(pattern.split("."), name.split("."), strict=True)
    )


@dataclass(frozen=True)
class Selection:
    """What one pass syncs: explicit tables, then matched ones; and the matched tables it does not."""

    tables: tuple[TableConfig, ...]
    removed: tuple[TableConfig, ...] = ()  # had a checkpoint, gone from the provider's listing
    needs_keys: tuple[tuple[TableConfig, tuple[str, ...]], ...] = ()  # (table, missing key columns)


def expand(
    explicit: Sequence[TableConfig],
    include: Sequence[IncludeConfig],
    listed: Mapping[str, Iterable[str] | None],
    checkpoints: Mapping[str, str],
    columns: Mapping[str, Sequence[str]] | None = None,
) -> Selection:
    """The tables a pass syncs.

    ``listed``: per provider, every ``share.schema.table`` its selected shares list (None: the
    listing failed — tables with a checkpoint are kept, to fail or sync as their provider lets
    them, never reported removed). ``checkpoints``: table key → the mode of its checkpoint.
    ``columns``: table key → the shared table's columns, for a matched table not synced yet whose
    mode needs keys (absent: not known, the pattern's settings stand).
    """
    taken = {t.key.lower() for t in explicit}
    chosen: dict[str, TableConfig] = {}
    removed: dict[str, TableConfig] = {}
    needs: list[tuple[TableConfig, tuple[str, ...]]] = []
    waiting: set[str] = set()  # needs keys: a later pattern does not take it either
    for entry in include:
        names = listed.get(entry.provider)
        present = {n.lower(): n for n in names} if names is not None else None
        remembered = [_name_of(k, entry.provider) for k in checkpoints]
        candidates = set(present.values()) if present is not None else set()
        candidates |= {n for n in remembered if n is not None}
        for name in sorted(candidates, key=str.lower):
            key = table_key(entry.provider, name).lower()
            if key in taken or key in chosen or key in removed or key in waiting or not entry.matches(name):
                continue
            table = entry.table_config(name)
            if present is not None and name.lower() not in present:
                removed[key] = table
                continue
            mode = checkpoints.get(table.key)
            settled = _settle(entry, table, mode, (columns or {}).get(table.key))
            if isinstance(settled, tuple):
                needs.append((table, settled))
                waiting.add(key)
            else:
                chosen[key] = settled
    _one_target_each([*explicit, *chosen.values(), *removed.values()])
    return Selection((*explicit, *chosen.values()), tuple(removed.values()), tuple(needs))


def _one_target_each(tables: Sequence[TableConfig]) -> None:
    """Two tables writing one target would overwrite each other: refuse the pass, naming both."""
    seen: dict[str, str] = {}
    for table in tables:
        target = table.target.rstrip("/")
        if target in seen:
            raise ConfigError(
                f"include: tables '{seen[target]}' and '{table.key}' get the same target '{table.target}'; "
                "add {provider}, {share} or {schema} to the pattern's target template"
            )
        seen[target] = table.key


def _name_of(key: str, provider: str) -> str | None:
    """The shared name of a checkpoint key when it is ``provider``'s table."""
    head, slash, rest = key.partition("/")
    if provider == DEFAULT_PROVIDER:
        return None if slash else key
    return rest if slash and head == provider else None


def _settle(
    entry: IncludeConfig, table: TableConfig, synced_as: str | None, columns: Sequence[str] | None
) -> TableConfig | tuple[str, ...]:
    """The pattern's table, in its fallback mode when it lacks the pattern's keys; or the
    missing keys (``needs keys``). A table synced before keeps the mode it was synced in."""
    fallback = entry.fallback_mode
    if synced_as is not None:
        return _fallen_back(table, fallback) if fallback is not None and synced_as == fallback else table
    if table.mode not in _KEYED or columns is None:
        return table
    present = {c.lower() for c in columns}
    missing = tuple(k for k in table.keys if k.lower() not in present)
    if not missing:
        return table
    return _fallen_back(table, fallback) if fallback is not None else missing


def _fallen_back(table: TableConfig, mode: str) -> TableConfig:
    """``table`` in append or snapshot mode: no keys, nor the settings only keyed modes take."""
    cleared = {"keys": [], "soft_delete": False, "merge_strategy": None}
    cleared |= {"track_history": None, "track_history_except": None}
    return TableConfig.model_validate({**table.model_dump(), **cleared, "mode": mode})


def needs_keys_message(table: TableConfig, missing: Sequence[str]) -> str:
    return (
        f"needs keys: the shared table has no column(s) {list(missing)} of the pattern's keys; "
        "add a 'tables:' entry with its keys, or set the pattern's 'fallback_mode: append | snapshot'"
    )
