"""One shared table's settings in ``sharesync.yaml``: ``tables[]`` entries and their ``defaults``.

Apart from the file's top-level sections (:mod:`sharesync.sync.core.config`) because a table's
rules — mode, keys, history lists, start — are checked on their own and read by every job.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from sharesync.sync.core.errors import ConfigError
from sharesync.sync.core.filters import Predicate
from sharesync.sync.core.limits import PassLimits
from sharesync.sync.core.maintenance_settings import MaintenanceSettings
from sharesync.sync.core.providers import DEFAULT_PROVIDER, table_key
from sharesync.sync.core.strict_model import StrictModel, validate_cron
from sharesync.sync.core.timestamps import parse_timestamp

# Merge mode rewrites the target when a batch's net changes reach this share of its rows: changed
# keys scattered over the table then touch every file of more than ~50 rows, so a MERGE would
# rewrite it all anyway.
DEFAULT_REWRITE_THRESHOLD = 0.1


class Mode(StrEnum):
    MERGE = "merge"
    APPEND = "append"
    SNAPSHOT = "snapshot"
    HISTORY = "history"  # a slowly changing dimension (type 2): every image of every key, with its validity


class NewColumnPolicy(StrEnum):
    """What a column new at the provider does to the target (``on_new_column``)."""

    ADD = "add"  # the target gains it; its older rows read NULL
    IGNORE = "ignore"  # the target keeps its columns; the new one is left out of every batch
    FAIL = "fail"  # the table stops until the config or the target changes


class BreakingChangePolicy(StrEnum):
    """What a dropped, renamed or retyped provider column does to the target (``on_breaking_change``)."""

    FAIL = "fail"  # the table stops, nothing written, until 'sharesync reset'
    REBUILD = "rebuild"  # re-bootstrap from the snapshot into a new target version with the new schema


class StartAtVersion(StrictModel):
    version: int = Field(ge=0)


class StartAtTimestamp(StrictModel):
    timestamp: datetime

    @field_validator("timestamp", mode="before")
    @classmethod
    def _parse(cls, value: Any) -> datetime:
        if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) < 10**11:
            # Epoch milliseconds before March 1973: almost surely seconds (1704067200 = 2024-01-01).
            raise ValueError(
                f"{value} would be epoch milliseconds, i.e. {parse_timestamp(value).isoformat()}; "
                "write an ISO-8601 timestamp such as '2024-01-01T00:00:00Z'"
            )
        return parse_timestamp(value)


Start = Literal["latest"] | StartAtVersion | StartAtTimestamp


class MergeStrategy(StrEnum):
    """How merge and history mode write a batch: see ``sharesync.pipelines.modes.merge.merge.apply_merge``."""

    AUTO = "auto"  # rewrite when the batch's net changes reach rewrite_threshold of the target's rows
    MERGE = "merge"  # always the MERGE statement
    REWRITE = "rewrite"  # always the copy-on-write rewrite (one overwrite commit)


class TableDefaults(StrictModel, PassLimits):
    max_versions_per_batch: int = Field(default=100, ge=1)
    merge_strategy: MergeStrategy = MergeStrategy.AUTO
    rewrite_threshold: float = Field(
        default=DEFAULT_REWRITE_THRESHOLD,
        ge=0,
        description="merge_strategy 'auto': share of the target's rows from which a batch rewrites it",
    )
    download_concurrency: int = Field(default=8, ge=1, le=256)
    deletion_vectors: bool = Field(
        default=True, description="new targets are merge-on-read (Delta deletion vectors); false: copy-on-write"
    )
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)
    schedule: str | None = Field(default=None, description="cron expression for a Dagster schedule")
    freshness_minutes: float | None = Field(default=None, gt=0, description="lag bound for the freshness check")

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return validate_cron(value)


class TableConfig(StrictModel):
    name: str = Field(description="share.schema.table")
    target: str = Field(min_length=1, description="Delta table path or URI")
    keys: list[str] = Field(default_factory=list)
    mode: Mode = Mode.MERGE
    where: list[Predicate] = Field(default_factory=list)
    columns: list[str] | None = None
    soft_delete: bool = False
    # History mode: a change to untracked columns only updates the current row in place.
    track_history: list[str] | None = None
    track_history_except: list[str] | None = None
    merge_strategy: MergeStrategy | None = None
    start: Start = "latest"
    max_versions_per_batch: int | None = Field(default=None, ge=1)
    download_concurrency: int | None = Field(default=None, ge=1, le=256)
    deletion_vectors: bool | None = None  # None: defaults.deletion_vectors (read when the target is created)
    maintenance: MaintenanceSettings | None = None  # None: defaults.maintenance (the whole section)
    schedule: str | None = None
    freshness_minutes: float | None = Field(default=None, gt=0)
    on_new_column: NewColumnPolicy = NewColumnPolicy.ADD
    on_breaking_change: BreakingChangePolicy = BreakingChangePolicy.FAIL
    provider: str = Field(default=DEFAULT_PROVIDER, description="a name from 'providers:' ('default': 'profile:')")
    # url | dir | auto (url unless the provider offers only dir): docs/protocol-support.md, "Access modes".
    access: Literal["auto", "url", "dir"] = "auto"

    @field_validator("name")
    @classmethod
    def _three_parts(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise ValueError(f"'{value}' must be 'share.schema.table' (three names separated by dots)")
        return value

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        return validate_cron(value)

    @field_validator("start", mode="before")
    @classmethod
    def _start(cls, value: Any) -> Any:
        # Dispatch by shape so a mistake gets one message instead of one per union member.
        if value == "latest" or isinstance(value, StartAtVersion | StartAtTimestamp):
            return value
        if isinstance(value, dict) and set(value) == {"version"}:
            return StartAtVersion.model_validate(value)
        if isinstance(value, dict) and set(value) == {"timestamp"}:
            try:
                return StartAtTimestamp.model_validate(value)
            except ValidationError as exc:
                raise ValueError(exc.errors(include_url=False)[0]["msg"].removeprefix("Value error, ")) from None
        raise ValueError("must be 'latest', {version: N} or {timestamp: '2024-01-01T00:00:00Z'}")

    @field_validator("keys", "columns", "track_history", "track_history_except")
    @classmethod
    def _no_duplicates(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len({v.lower() for v in value}) != len(value):
            raise ValueError("lists a column twice (names match columns in any case)")
        return value

    @model_validator(mode="after")
    def _mode_rules(self) -> TableConfig:
        if self.mode is Mode.MERGE and not self.keys:
            raise ValueError("mode 'merge' needs 'keys' (the primary-key columns), or use mode 'append'/'snapshot'")
        if self.soft_delete and self.mode is not Mode.MERGE:
            raise ValueError("'soft_delete' only applies to mode 'merge'")
        if self.merge_strategy is not None and self.mode not in (Mode.MERGE, Mode.HISTORY):
            raise ValueError("'merge_strategy' only applies to mode 'merge' or 'history'")
        if self.columns is not None and self.on_new_column is not NewColumnPolicy.ADD:
            raise ValueError(
                f"'on_new_column: {self.on_new_column}' has no effect with 'columns' (a new provider column is "
                "never taken then); remove one of them"
            )
        self._history_rules()
        return self

    def _history_rules(self) -> None:
        if self.mode is Mode.HISTORY and not self.keys:
            raise ValueError("mode 'history' needs 'keys' (the primary-key columns whose history is kept)")
        lists = {o: n for o, n in self.track_lists() if n is not None}
        if lists and self.mode is not Mode.HISTORY:
            raise ValueError(f"'{next(iter(lists))}' only applies to mode 'history'; remove it or set mode: history")
        if len(lists) == 2:
            raise ValueError("'track_history' and 'track_history_except' exclude each other; keep one of them")
        keys = {k.lower() for k in self.keys}
        kept = None if self.columns is None else {c.lower() for c in (*self.keys, *self.columns)}
        for option, names in lists.items():
            if own := [c for c in names if c.lower().startswith("_sharesync_")]:
                raise ValueError(f"'{option}' names sharesync's own column(s) {own}; they are always kept, remove them")
            if option == "track_history_except" and (listed := [c for c in names if c.lower() in keys]):
                raise ValueError(f"'{option}' lists the key column(s) {listed}; keys are always tracked, remove them")
            if kept is not None and (outside := [c for c in names if c.lower() not in kept]):
                raise ValueError(f"'{option}' names {outside}, which 'columns' leaves out; add them or remove them")

    def track_lists(self) -> tuple[tuple[str, list[str] | None], ...]:
        """History mode's two column lists by option name (at most one is set)."""
        return ("track_history", self.track_history), ("track_history_except", self.track_history_except)

    @property
    def key(self) -> str:
        """The table's identity in the state store, results and commands (providers.table_key)."""
        return table_key(self.provider, self.name)

    @property
    def share(self) -> str:
        return self.name.split(".")[0]

    @property
    def schema_name(self) -> str:
        return self.name.split(".")[1]

    @property
    def table(self) -> str:
        return self.name.split(".")[2]


def check_tracked_columns(table: TableConfig, column_names: Sequence[str], *, version: int | None = None) -> None:
    """ConfigError naming each ``track_history``/``track_history_except`` column the shared table lacks.

    Pure, for the run's one check of the config against the shared schema (next to ``keys`` and
    ``columns``, before anything downloads): only that schema knows the table's columns.
    """
    present = {name.lower() for name in column_names}
    at = f" at version {version}" if version is not None else ""
    for option, names in table.track_lists():
        missing = [n for n in names or () if n.lower() not in present]
        if missing:
            raise ConfigError(
                f"tables[{table.name}].{option}: {missing} not in the shared table's columns{at} "
                f"({', '.join(column_names)}); fix '{option}' in the config"
            )
