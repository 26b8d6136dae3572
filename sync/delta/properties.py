"""What a reader learns from a table's log before touching data: column mapping mode, DV descriptors.

Kept apart from the decoders (which need Arrow and roaring bitmaps) so that the protocol models
can carry these values without importing either: a sync with nothing to do stays light.
Delta PROTOCOL.md, "Column Mapping" and "Deletion Vector Descriptor Schema".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeGuard

from sharesync.sync.core.errors import ProtocolViolation

ColumnMappingMode = Literal["none", "name", "id"]
StorageType = Literal["u", "p", "i"]

_MODE_KEY = "delta.columnMapping.mode"
_MODES: dict[str, ColumnMappingMode] = {"none": "none", "name": "name", "id": "id"}


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The ``deletionVector`` struct of an ``add`` or ``remove`` action."""

    storage_type: StorageType
    path_or_inline_dv: str = field(repr=False)  # a presigned URL for storage type "p"
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> DeletionVectorDescriptor:
        """Validate the JSON object as Delta writes it (camelCase keys)."""
        storage_type = raw.get("storageType")
        if storage_type not in ("u", "p", "i"):
            raise ProtocolViolation(f"deletion vector has storageType {storage_type!r}; expected 'u', 'p' or 'i'")
        path = raw.get("pathOrInlineDv")
        if not isinstance(path, str) or not path:
            raise ProtocolViolation("deletion vector has no pathOrInlineDv")
        offset = raw.get("offset")
        if offset is not None and not _is_count(offset):
            raise ProtocolViolation(f"deletion vector has offset {offset!r}; expected a byte position")
        size, cardinality = raw.get("sizeInBytes"), raw.get("cardinality")
        if not _is_count(size) or not _is_count(cardinality):
            raise ProtocolViolation(
                f"deletion vector has sizeInBytes {size!r} and cardinality {cardinality!r}; expected counts"
            )
        return cls(
            storage_type=storage_type,
            path_or_inline_dv=path,
            size_in_bytes=size,
            cardinality=cardinality,
            offset=offset if _is_count(offset) else None,
        )

    @property
    def unique_id(self) -> str:
        """Tells two DVs of one data file apart (Delta's derived ``uniqueId``)."""
        base = f"{self.storage_type}{self.path_or_inline_dv}"
        return base if self.offset is None else f"{base}@{self.offset}"


def column_mapping_mode(configuration: Mapping[str, str], reader_features: frozenset[str]) -> ColumnMappingMode:
    """The mode to read with: the table property counts only if the protocol has ``columnMapping``."""
    if "columnMapping" not in reader_features:
        return "none"
    value = configuration.get(_MODE_KEY, "none")
    mode = _MODES.get(value)
    if mode is None:
        raise ProtocolViolation(f"table property {_MODE_KEY} is {value!r}; expected 'none', 'name' or 'id'")
    return mode


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
