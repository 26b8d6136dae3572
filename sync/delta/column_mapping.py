"""Column mapping: from the physical column names (or ids) in data files and the log to logical names.

With ``delta.columnMapping.mode`` ``name`` or ``id`` a writer names parquet columns, partition
values and per-file statistics by each field's *physical* name (``col-<uuid>``), so that renames
and drops never rewrite data. Readers resolve file columns by physical name (``name``) or by the
parquet field id (``id``), and partition values and stats by physical name in both modes; the
logical (display) names are what the target gets. Nested struct fields are mapped too, including
structs inside arrays and maps.

A rename at the provider keeps the physical name and changes the logical one, so files written
before it read under the new name. For a sharesync target that is a schema change like any
other (``pipelines/targets/schema_evolution.py``): the old name disappears, which is breaking — the
batch is refused with ``SchemaIncompatible`` and nothing is written; ``sharesync reset`` rebuilds
the target under the new names — while a column that only appears is additive. A drop is breaking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import pyarrow as pa

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.properties import ColumnMappingMode, column_mapping_mode

__all__ = ["ColumnMapping", "ColumnMappingMode", "MappedField", "Shape", "column_mapping_mode"]

ArrowData = TypeVar("ArrowData", pa.Table, pa.RecordBatch)

_PHYSICAL_KEY = "delta.columnMapping.physicalName"
_ID_KEY = "delta.columnMapping.id"
_PARQUET_FIELD_ID = b"PARQUET:field_id"
_STATS_BY_COLUMN = ("minValues", "maxValues", "nullCount")
# Change data files carry the change type under this name in every mapping mode.
_CHANGE_TYPE = "_change_type"


@dataclass(frozen=True)
class Shape:
    """The struct fields inside a Delta type, reached through arrays (``element``) and maps."""

    fields: tuple[MappedField, ...] = ()
    element: Shape | None = None
    key: Shape | None = None
    value: Shape | None = None


@dataclass(frozen=True)
class MappedField:
    """One struct field: its logical name, physical name, id, and the struct fields inside its type."""

    logical: str
    physical: str
    field_id: int | None = None
    shape: Shape | None = None  # None: no struct inside this field's type


@dataclass(frozen=True)
class ColumnMapping:
    """How one table version's schema maps physical names and ids to logical names."""

    mode: ColumnMappingMode
    fields: tuple[MappedField, ...]
    _by_physical: dict[str, MappedField] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_physical", {f.physical: f for f in self.fields})

    @classmethod
    def from_schema(cls, schema: str | Mapping[str, object], mode: ColumnMappingMode) -> ColumnMapping:
        """From ``metaData.schemaString`` (text or parsed); ``name``/``id`` need each field's mapping metadata."""
        parsed: object = json.loads(schema) if isinstance(schema, str) else schema
        if not isinstance(parsed, Mapping) or parsed.get("type") != "struct":
            raise ProtocolViolation("table schema is not a Delta struct type")
        shape = _shape(parsed, mode, "")
        return cls(mode=mode, fields=shape.fields if shape else ())

    @property
    def logical_names(self) -> dict[str, str]:
        """Top-level physical name -> logical name."""
        return {f.physical: f.logical for f in self.fields}

    def file_columns(self, file_schema: pa.Schema) -> dict[str, str]:
        """Column name in a data file -> logical name, for the file columns this schema knows.

        A file column the schema does not know (a dropped column) is left out; a schema column the
        file lacks (added later) is the caller's to fill with nulls.
        """
        if self.mode == "none":
            return {name: name for name in file_schema.names}
        return {file_schema.field(i).name: m.logical for i, m in self._matches(file_schema)}

    def to_logical(self, data: ArrowData) -> ArrowData:
        """``data`` read from a data file, with logical names at every level; unknown columns dropped
        (``_change_type`` of change data files is kept).

        Zero-copy: renaming struct fields is an Arrow ``view`` of the same buffers.
        """
        if self.mode == "none":
            return data
        columns: list[pa.Array | pa.ChunkedArray] = []
        fields: list[pa.Field] = []
        for i, mapped in self._matches(data.schema):
            file_field = data.schema.field(i)
            type_ = _logical_type(file_field.type, mapped.shape, self.mode == "id")
            columns.append(_view(data.column(i), type_))
            fields.append(pa.field(mapped.logical, type_, file_field.nullable))
        if isinstance(data, pa.RecordBatch):
            return pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields))
        return pa.Table.from_arrays(columns, schema=pa.schema(fields))

    def partition_values(self, values: Mapping[str, str | None]) -> dict[str, str | None]:
        """An action's ``partitionValues`` keyed by logical name."""
        if self.mode == "none":
            return dict(values)
        out: dict[str, str | None] = {}
        for physical, value in values.items():
            mapped = self._by_physical.get(physical)
            if mapped is None:
                raise ProtocolViolation(f"partition value for {physical!r}, which is no column of the table schema")
            out[mapped.logical] = value
        return out

    def stats(self, stats: Mapping[str, object]) -> dict[str, object]:
        """Parsed per-file ``stats`` with ``minValues``/``maxValues``/``nullCount`` keyed by logical name.

        Entries for columns the schema does not know (dropped columns) are left out.
        """
        if self.mode == "none":
            return dict(stats)
        return {
            key: _stats_by_logical(value, self.fields)
            if key in _STATS_BY_COLUMN and isinstance(value, Mapping)
            else value
            for key, value in stats.items()
        }

    def _matches(self, file_schema: pa.Schema) -> list[tuple[int, MappedField]]:
        """(index in the file, schema field) for each file column the schema knows."""
        by_id = self.mode == "id"
        if by_id and len(file_schema) and all(_parquet_field_id(f) is None for f in file_schema):
            raise ProtocolViolation("data file has no parquet field ids, but the table's column mapping mode is 'id'")
        pairs = [(i, _match(f, self.fields, by_id) or _PASSTHROUGH.get(f.name)) for i, f in enumerate(file_schema)]
        return [(i, m) for i, m in pairs if m is not None]


_PASSTHROUGH = {_CHANGE_TYPE: MappedField(logical=_CHANGE_TYPE, physical=_CHANGE_TYPE)}


def _shape(type_: object, mode: ColumnMappingMode, path: str) -> Shape | None:
    if isinstance(type_, str):
        return None
    if not isinstance(type_, Mapping):
        raise ProtocolViolation(f"schema type at {path or 'the root'} is {type_!r}, not a Delta type")
    kind = type_.get("type")
    if kind == "struct":
        raw_fields = type_.get("fields")
        if not isinstance(raw_fields, list):
            raise ProtocolViolation(f"struct at {path or 'the root'} has no field list")
        return Shape(fields=tuple(_mapped_field(raw, mode, path) for raw in raw_fields))
    if kind == "array":
        element = _shape(type_.get("elementType"), mode, f"{path}.element")
        return Shape(element=element) if element else None
    if kind == "map":
        key = _shape(type_.get("keyType"), mode, f"{path}.key")
        value = _shape(type_.get("valueType"), mode, f"{path}.value")
        return Shape(key=key, value=value) if key or value else None
    raise ProtocolViolation(f"schema type at {path or 'the root'} has unknown kind {kind!r}")


def _mapped_field(raw: object, mode: ColumnMappingMode, parent: str) -> MappedField:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ProtocolViolation(f"struct field under {parent or 'the root'} has no name")
    name: str = raw["name"]
    path = f"{parent}.{name}" if parent else name
    metadata = raw.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    physical, field_id = metadata.get(_PHYSICAL_KEY, name), metadata.get(_ID_KEY)
    if mode != "none" and _PHYSICAL_KEY not in metadata:
        raise ProtocolViolation(f"column {path} has no {_PHYSICAL_KEY}, but the column mapping mode is {mode!r}")
    if mode == "id" and (not isinstance(field_id, int) or isinstance(field_id, bool)):
        raise ProtocolViolation(f"column {path} has no integer {_ID_KEY}, but the column mapping mode is 'id'")
    if not isinstance(physical, str):
        raise ProtocolViolation(f"column {path} has {_PHYSICAL_KEY} {physical!r}, not a name")
    return MappedField(
        logical=name,
        physical=physical,
        field_id=field_id if isinstance(field_id, int) else None,
        shape=_shape(raw.get("type"), mode, path),
    )


def _parquet_field_id(file_field: pa.Field) -> int | None:
    raw = (file_field.metadata or {}).get(_PARQUET_FIELD_ID)
    return int(raw) if raw is not None else None


def _match(file_field: pa.Field, fields: tuple[MappedField, ...], by_id: bool) -> MappedField | None:
    if by_id:
        wanted = _parquet_field_id(file_field)
        return next((f for f in fields if wanted is not None and f.field_id == wanted), None)
    return next((f for f in fields if f.physical == file_field.name), None)


def _logical_type(file_type: pa.DataType, shape: Shape | None, by_id: bool) -> pa.DataType:
    """``file_type`` with the struct fields the shape knows renamed; unknown children keep their names."""
    if shape is None:
        return file_type
    if pa.types.is_struct(file_type) and shape.fields:
        children = [file_type.field(i) for i in range(file_type.num_fields)]
        return pa.struct([_logical_child(child, shape.fields, by_id) for child in children])
    if (pa.types.is_list(file_type) or pa.types.is_large_list(file_type)) and shape.element:
        element = file_type.value_field
        renamed = element.with_type(_logical_type(element.type, shape.element, by_id))
        return pa.list_(renamed) if pa.types.is_list(file_type) else pa.large_list(renamed)
    if pa.types.is_map(file_type):
        key, item = file_type.key_field, file_type.item_field
        return pa.map_(
            key.with_type(_logical_type(key.type, shape.key, by_id)),
            item.with_type(_logical_type(item.type, shape.value, by_id)),
            keys_sorted=file_type.keys_sorted,
        )
    return file_type


def _logical_child(child: pa.Field, fields: tuple[MappedField, ...], by_id: bool) -> pa.Field:
    mapped = _match(child, fields, by_id)
    if mapped is None:
        return child
    return child.with_name(mapped.logical).with_type(_logical_type(child.type, mapped.shape, by_id))


def _view(column: pa.Array | pa.ChunkedArray, type_: pa.DataType) -> pa.Array | pa.ChunkedArray:
    if column.type == type_:
        return column
    if isinstance(column, pa.ChunkedArray):
        return pa.chunked_array([chunk.view(type_) for chunk in column.chunks], type=type_)
    return column.view(type_)


def _stats_by_logical(values: Mapping[str, object], fields: tuple[MappedField, ...]) -> dict[str, object]:
    """One stats map (nested for structs) keyed by logical name; unknown physical names dropped."""
    by_physical = {f.physical: f for f in fields}
    out: dict[str, object] = {}
    for physical, value in values.items():
        mapped = by_physical.get(physical)
        if mapped is None:
            continue
        nested = mapped.shape.fields if mapped.shape else ()
        out[mapped.logical] = _stats_by_logical(value, nested) if nested and isinstance(value, Mapping) else value
    return out
