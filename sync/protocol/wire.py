"""Pydantic models of everything the Delta Sharing protocol puts on the wire.

Both sides use them (client and local server cannot drift apart): the client validates each
NDJSON line into one :data:`Action`. Unknown fields are ignored, and so are unknown wrapper keys
(the forward-compatibility rule: a newer server may add actions); a line holding only those
parses to None and the reader skips it. A line with two known actions, or with one key twice, is a ProtocolViolation: it cannot
be read as one action without guessing which to drop. Models are built lazily (``defer_build``),
so a command that never reads a listing or an action (a no-op sync) does not pay for them.
(Delta Sharing protocol, "API Response Format in Parquet".) Answers in the delta response format
are read into the same models by :mod:`sharesync.sync.protocol.deltaformat`; the fields only that
format fills (reader features, deletion vectors) stay empty in parquet answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from sharesync.sync.core.changefeed import ChangeFeed, change_feed_of
from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.properties import ColumnMappingMode, DeletionVectorDescriptor, column_mapping_mode

if TYPE_CHECKING:
    from sharesync.sync.delta.column_mapping import ColumnMapping


class WireModel(BaseModel):
    """Frozen, camelCase on the wire, snake_case in Python, unknown fields ignored."""

    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="ignore", defer_build=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# ---------------------------------------------------------------- listings


class Share(WireModel):
    name: str
    id: str | None = None
    display_name: str | None = None  # these three: on shares only (schemas and tables carry none)
    comment: str | None = None
    properties: dict[str, str] | None = None


class Schema(WireModel):
    name: str
    share: str


class TableAccess(WireModel):  # how a table may be read (spec "Directory-based access")
    location: str | None = None
    auxiliary_locations: tuple[str, ...] | None = None
    access_modes: tuple[str, ...] | None = None  # absent: url only


class Table(TableAccess):
    name: str
    schema_: str = Field(alias="schema")
    share: str
    share_id: str | None = None
    id: str | None = None

    @property
    def full_name(self) -> str:
        return f"{self.share}.{self.schema_}.{self.name}"


class ListSharesPage(WireModel):
    items: list[Share] | None = None
    next_page_token: str | None = None


class ListSchemasPage(WireModel):
    items: list[Schema] | None = None
    next_page_token: str | None = None


class ListTablesPage(WireModel):
    items: list[Table] | None = None
    next_page_token: str | None = None


class GetShareResponse(WireModel):
    share: Share


class ErrorBody(WireModel):
    error_code: str | None = None
    message: str | None = None


# ---------------------------------------------------------------- request bodies


class QueryRequest(WireModel):
    """Body of Read Data from a Table (spec "Request Body"): sent by the client, read by the server."""

    predicate_hints: list[str] | None = None
    json_predicate_hints: str | None = None
    limit_hint: int | None = None
    version: int | None = None
    timestamp: str | None = None
    starting_version: int | None = None
    ending_version: int | None = None
    max_files: int | None = None
    page_token: str | None = None
    include_refresh_token: bool | None = None
    refresh_token: str | None = Field(default=None, repr=False)
    idempotency_key: str | None = None  # asyncquery=true only: the same key maps to the same queryId

    @property
    def is_latest_snapshot(self) -> bool:
        return self.version is None and self.timestamp is None and self.starting_version is None


class QueryInfoRequest(WireModel):
    """Body of Get Query Info: the page of a succeeded asynchronous query to return."""

    max_files: int | None = None
    page_token: str | None = None


class QueryStatus(WireModel):
    """The ``queryStatus`` line of an asynchronous query that has not succeeded (yet)."""

    query_id: str
    status: str  # "pending" or "failed"; a succeeded query answers with its files instead
    error_message: str | None = None


class QueryStatusLine(WireModel):
    query_status: QueryStatus


class ChangesRequest(WireModel):
    """Query parameters of Read Change Data Feed from a Table."""

    starting_version: int | None = None
    starting_timestamp: str | None = None
    ending_version: int | None = None
    ending_timestamp: str | None = None
    include_historical_metadata: bool | None = None
    include_historical_protocol: bool | None = None
    max_files: int | None = None
    page_token: str | None = None

    def to_params(self) -> dict[str, str | int]:
        return {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in self.to_wire().items()}


# ---------------------------------------------------------------- table schema (schemaString)


class StructField(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    name: str
    type: str | dict[str, Any]
    nullable: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def type_name(self) -> str:
        """``long``, ``decimal(10,2)``, … for primitives; ``struct``/``array``/``map`` for nested."""
        return self.type if isinstance(self.type, str) else str(self.type.get("type"))


class StructType(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    type: Literal["struct"] = "struct"
    fields: list[StructField]
    # Not in ``schemaString``: the table's ``delta.columnMapping.mode``, set by :attr:`Metadata.table_schema`
    # so that whoever reads data files with this schema knows their columns are physical names.
    column_mapping_mode: ColumnMappingMode = Field(default="none", exclude=True)

    @cached_property
    def column_mapping(self) -> ColumnMapping:
        """Physical (file) names and ids → these logical names; the identity when the mode is ``none``."""
        from sharesync.sync.delta.column_mapping import ColumnMapping  # Arrow: only where files are read

        return ColumnMapping.from_schema(self.model_dump(mode="json"), self.column_mapping_mode)

    def field(self, name: str) -> StructField | None:
        """Case-insensitive lookup, as the protocol treats column names."""
        lowered = name.lower()
        return next((f for f in self.fields if f.name.lower() == lowered), None)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]


# ---------------------------------------------------------------- actions

_HONOUR_MAPPING = frozenset({"columnMapping"})


class Format(WireModel):
    provider: str = "parquet"
    options: dict[str, str] | None = None


class Protocol(WireModel):
    """``minReaderVersion`` (parquet answers: always 1); the rest only in delta-format answers."""

    min_reader_version: int
    min_writer_version: int | None = None
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None
    version: int | None = None  # includeHistoricalProtocol: the version this protocol took effect


class Metadata(TableAccess):
    id: str
    name: str | None = None
    description: str | None = None
    format: Format = Field(default_factory=Format)
    schema_string: str
    partition_columns: list[str] = Field(default_factory=list)
    configuration: dict[str, str] | None = None
    version: int | None = None
    size: int | None = None
    num_files: int | None = None

    @cached_property
    def table_schema(self) -> StructType:
        try:
            schema = StructType.model_validate_json(self.schema_string)
        except ValidationError as exc:
            raise ProtocolViolation(f"metaData.schemaString is not a valid schema: {exc}") from None
        mode = self.column_mapping_mode
        return schema if mode == "none" else schema.model_copy(update={"column_mapping_mode": mode})

    @property
    def column_mapping_mode(self) -> ColumnMappingMode:
        """``delta.columnMapping.mode``: only delta-format answers carry the table's own properties,
        with a protocol that lists ``columnMapping`` whenever the property is set (checked there)."""
        return column_mapping_mode(self.configuration or {}, _HONOUR_MAPPING)

    @property
    def cdf_enabled(self) -> bool:  # said to be on (no configuration: unknown, not on)
        return change_feed_of(self.configuration) is ChangeFeed.ON


class FileStats(BaseModel):
    """Per-file statistics (the ``stats`` JSON string); every part may be missing."""

    model_config = ConfigDict(
        frozen=True, extra="ignore", populate_by_name=True, alias_generator=to_camel, defer_build=True
    )

    num_records: int | None = None
    min_values: dict[str, Any] = Field(default_factory=dict)
    max_values: dict[str, Any] = Field(default_factory=dict)
    null_count: dict[str, Any] = Field(default_factory=dict)


class _FileBase(WireModel):
    url: str
    id: str
    partition_values: dict[str, str | None] = Field(default_factory=dict)
    size: int = Field(ge=0)  # every download is checked against it: a negative one is a lie
    expiration_timestamp: int | None = None
    # Delta-format answers only (never serialized into a parquet answer): the rows of the data
    # file this logical file no longer holds, and whether the action changes data at all.
    deletion_vector: DeletionVectorDescriptor | None = Field(default=None, repr=False, exclude=True)
    deletion_vector_file_id: str | None = Field(default=None, exclude=True)
    data_change: bool = Field(default=True, exclude=True)

    def __repr__(self) -> str:  # never show the presigned URL
        return f"{type(self).__name__}(id={self.id!r}, size={self.size})"

    __str__ = __repr__


class File(_FileBase):
    stats: str | None = None
    version: int | None = None
    timestamp: int | None = None

    @cached_property
    def parsed_stats(self) -> FileStats | None:
        return parse_stats(self.stats)


class AddFile(_FileBase):
    timestamp: int
    version: int = Field(ge=0)
    stats: str | None = None

    @cached_property
    def parsed_stats(self) -> FileStats | None:
        return parse_stats(self.stats)


class CdfFile(_FileBase):
    timestamp: int
    version: int = Field(ge=0)


class RemoveFile(_FileBase):
    timestamp: int
    version: int = Field(ge=0)


class EndStreamAction(WireModel):
    refresh_token: str | None = None
    next_page_token: str | None = None
    min_url_expiration_timestamp: int | None = None
    error_message: str | None = None


Action = Protocol | Metadata | File | AddFile | CdfFile | RemoveFile | EndStreamAction
DataFile = File | AddFile | CdfFile | RemoveFile

# Wrapper key on the wire → model. The order is the order a response normally has.
ACTION_KEYS: dict[str, type[Action]] = {
    "protocol": Protocol,
    "metaData": Metadata,
    "file": File,
    "add": AddFile,
    "cdf": CdfFile,
    "remove": RemoveFile,
    "endStreamAction": EndStreamAction,
}
_KEY_OF: dict[type[WireModel], str] = {model: key for key, model in ACTION_KEYS.items()}
A = TypeVar("A", bound=WireModel)


def parse_stats(stats: str | None) -> FileStats | None:
    """Stats are optional and advisory: unreadable stats are treated as absent, never fatal."""
    if not stats:
        return None
    try:
        return FileStats.model_validate_json(stats)
    except ValidationError:
        return None


def parse_action(line: str | bytes) -> Action | None:
    """Validate one NDJSON line into its action; None when it holds only actions this client does not know."""
    found = decode_wrapper(line, ACTION_KEYS)
    if found is None:
        return None
    key, value = found
    return validate_action(ACTION_KEYS[key], key, value)


def decode_wrapper(line: str | bytes, known: Mapping[str, object]) -> tuple[str, object] | None:
    """The one known ``(key, value)`` of a wrapper line; None when it holds only unknown keys."""
    # json.loads keeps only the last of two equal keys; the outermost object is decoded last,
    # so the last hook call tells whether the wrapper itself repeated a key ({"file": …, "file": …}).
    doubled: list[list[str]] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        doubled.append(sorted({k for k in keys if keys.count(k) > 1}) if len(set(keys)) != len(keys) else [])
        return dict(pairs)

    try:
        wrapper = json.loads(line, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as exc:
        raise ProtocolViolation(f"response line is not JSON ({exc.msg} at column {exc.colno})") from None
    except UnicodeDecodeError as exc:  # json.loads of bytes decodes them first
        raise ProtocolViolation(f"response line is not UTF-8 (byte {exc.start})") from None
    if not isinstance(wrapper, dict):
        raise ProtocolViolation("response line is not a JSON object")
    if doubled and doubled[-1]:
        raise ProtocolViolation(f"a response line repeats the key {doubled[-1][0]!r}; it must hold exactly one action")
    keys = [k for k in wrapper if k in known]
    if not keys and wrapper:
        return None  # only actions of a newer protocol: the reader skips the line
    if len(keys) != 1:
        raise ProtocolViolation(f"a response line must hold exactly one action, found {len(keys)}: {keys}")
    return keys[0], wrapper[keys[0]]


def validate_action(model: type[A], key: str, value: object) -> A:
    """``value`` as ``model``; a ProtocolViolation naming each invalid field otherwise."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False))
        raise ProtocolViolation(f"invalid {key!r} action: {problems}") from None


def wrap_action(action: WireModel) -> dict[str, Any]:
    """The wire form ``{"<key>": {...}}`` of an action (used by the server)."""
    return {_KEY_OF[type(action)]: action.to_wire()}
