"""Delta schema (``metaData.schemaString``) → Arrow schema.

Staged files must all carry one schema so the engine reads a single dataset: files
written before a column was added lack it, partition columns are not in the files at all,
and writers differ in physical types (INT96 vs micros timestamps, string vs large_string).
Casting every staged batch to the Arrow form of the table's Delta schema settles all that.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION
from sharesync.sync.protocol.wire import StructField, StructType

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "int": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    # Delta "timestamp" is an instant (stored adjusted to UTC); "timestamp_ntz" is wall-clock: staged
    # without a zone, it lands as timestamp_ntz in the target (Sail writes the timestampNtz feature).
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}

# Nullable although never null: targets inherit the staged nullability (the guard column
# ``_sharesync_version``, append mode's change columns), and Sail's ``mergeSchema`` silently adds
# no column to a Delta table that has a NOT NULL column (pysail 0.7.2), which would make every
# additive schema change at the provider fail in merge mode and lose the new column in append
# and snapshot mode. tests/e2e/test_schema.py covers it.
_CHANGE_FIELDS: tuple[pa.Field, ...] = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(COMMIT_VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC")),
)


class UnsupportedType(ValueError):
    """A Delta type sharesync cannot stage (the message names it)."""


def arrow_type(delta_type: str | dict[str, Any]) -> pa.DataType:
    if isinstance(delta_type, str):
        if delta_type in _PRIMITIVES:
            return _PRIMITIVES[delta_type]
        match = _DECIMAL.match(delta_type)
        if match:
            return pa.decimal128(int(match.group(1)), int(match.group(2)))
        raise UnsupportedType(f"unsupported Delta type {delta_type!r}")
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct([arrow_field(StructField.model_validate(f)) for f in delta_type["fields"]])
    if kind == "array":
        return pa.list_(
            pa.field("element", arrow_type(delta_type["elementType"]), delta_type.get("containsNull", True))
        )
    if kind == "map":
        return pa.map_(arrow_type(delta_type["keyType"]), arrow_type(delta_type["valueType"]))
    raise UnsupportedType(f"unsupported Delta type {delta_type!r}")


def arrow_field(field: StructField) -> pa.Field:
    # Staged data is always nullable: deletes and filtered rows may carry nulls anywhere.
    return pa.field(field.name, arrow_type(field.type), nullable=True)


def arrow_schema(schema: StructType, *, with_change_columns: bool = False) -> pa.Schema:
    fields = [arrow_field(f) for f in schema.fields]
    if with_change_columns:
        fields.extend(_CHANGE_FIELDS)
    return pa.schema(fields)
