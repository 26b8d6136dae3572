"""Best-effort file pruning for ``/query``: ``jsonPredicateHints`` on partition values, ``limitHint``.

Both are hints (spec "Request Body"): the server may return more files than needed, never
fewer, and "if the server encounters any errors during predicate processing ... it will skip
filtering and return all the files". So evaluation is three-valued and a file is dropped only
when the predicate is certainly false for its partition values; anything not understood
(a data column, an unknown op, a bad literal) keeps the file. Pure functions.

With column mapping, hints and ``partitionColumns`` name columns logically while each file's
``partitionValues`` is keyed by physical name: the values are renamed first, or no partition
column would ever be found and every file kept.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from typing import Any

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.core.timestamps import parse_timestamp
from sharesync.sync.delta.column_mapping import ColumnMapping
from sharesync.sync.server.logmodel import COLUMN_MAPPING_PROPERTY, FileEntry, TableMetadata

log = logging.getLogger(__name__)

Value = bool | int | float | str | date | None


class _Unknown(Exception):
    """This part of the predicate cannot be decided from partition values."""


def _cast(raw: Any, value_type: str) -> Value:
    if raw is None or raw == "":  # spec "Partition Value Serialization": empty string is null
        return None
    text = str(raw)
    casts: dict[str, Callable[[str], Value]] = {
        "bool": lambda t: t.lower() == "true",
        "int": int,
        "long": int,
        "float": float,
        "double": float,
        "string": str,
        "date": date.fromisoformat,
        "timestamp": lambda t: parse_timestamp(t).isoformat(),
    }
    kind = str(value_type).lower()  # spec: value types are case-insensitive
    if kind not in casts:
        raise _Unknown(f"value type {value_type!r}")
    return casts[kind](text)


_COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "equal": lambda a, b: bool(a == b),
    "lessThan": lambda a, b: bool(a < b),
    "lessThanOrEqual": lambda a, b: bool(a <= b),
    "greaterThan": lambda a, b: bool(a > b),
    "greaterThanOrEqual": lambda a, b: bool(a >= b),
}


def _family(value: Value) -> type:
    """Values comparable with each other: numbers together (a bool is not one), else by type."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float
    return type(value)


class _Evaluator:
    def __init__(self, partition_columns: Sequence[str], values: dict[str, str | None]) -> None:
        self._columns = {c.lower(): c for c in partition_columns}
        self._values = {k.lower(): v for k, v in values.items()}

    def leaf(self, node: dict[str, Any]) -> Value:
        op = node.get("op")
        if op == "literal":
            return _cast(node.get("value"), node.get("valueType", "string"))
        if op == "column":
            name = str(node.get("name", "")).lower()
            if name not in self._columns:
                raise _Unknown(f"column {name!r} is not a partition column")
            return _cast(self._values.get(name), node.get("valueType", "string"))
        raise _Unknown(f"op {op!r} is not a leaf")

    def truth(self, node: dict[str, Any]) -> bool | None:
        """True/False when decided, None for SQL NULL or undecidable."""
        op = node.get("op")
        children = node.get("children") or []
        if op in ("and", "or"):
            results = [self._safe(child) for child in children]
            if op == "and":
                return False if False in results else (None if None in results else True)
            return True if True in results else (None if None in results else False)
        if op == "not":
            inner = self._safe(children[0])
            return None if inner is None else not inner
        if op == "isNull":
            return self.leaf(children[0]) is None
        if op in _COMPARISONS:
            left, right = self.leaf(children[0]), self.leaf(children[1])
            if left is None or right is None:
                return None
            if _family(left) != _family(right):  # a date is never equal to a string: undecided, not false
                raise _Unknown(f"{type(left).__name__} compared with {type(right).__name__}")
            return _COMPARISONS[op](left, right)
        raise _Unknown(f"op {op!r}")

    def _safe(self, node: dict[str, Any]) -> bool | None:
        try:
            return self.truth(node)
        except _Unknown:
            return None


def logical_names(metadata: TableMetadata) -> dict[str, str]:
    """Physical -> logical column names of a column-mapping table ({} without column mapping, or
    when the schema lacks the mapping: then nothing is pruned that should not be)."""
    mode = metadata.configuration.get(COLUMN_MAPPING_PROPERTY, "none").lower()
    if mode not in ("name", "id"):
        return {}
    try:
        return ColumnMapping.from_schema(metadata.schema_string, "name" if mode == "name" else "id").logical_names
    except (ProtocolViolation, ValueError):
        return {}


def prune_by_json_predicate(
    files: Sequence[FileEntry],
    hints: str | None,
    partition_columns: Sequence[str],
    physical_to_logical: Mapping[str, str] | None = None,
) -> list[FileEntry]:
    """Drop the files whose partition values make the predicate certainly false."""
    if not hints or not partition_columns:
        return list(files)
    names = physical_to_logical or {}
    try:
        tree = json.loads(hints)
        if not isinstance(tree, dict):
            raise ValueError("the predicate is not a JSON object")
        # A malformed tree raises below and keeps every file (spec: skip filtering on any error).
        kept = [
            f
            for f in files
            if _Evaluator(partition_columns, {names.get(k, k): v for k, v in f.partition_values.items()})._safe(tree)
            is not False
        ]
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        log.info("ignoring jsonPredicateHints: %s", exc)
        return list(files)
    return kept


def apply_limit_hint(files: Sequence[FileEntry], limit: int | None) -> list[FileEntry]:
    """The shortest prefix whose known live rows reach ``limit``; files without stats never count
    (``numRecords`` less a deletion vector's rows: the spec lets a hint add files, never drop rows)."""
    if limit is None or limit < 0:
        return list(files)
    chosen: list[FileEntry] = []
    rows = 0
    for entry in files:
        if rows >= limit:
            break
        chosen.append(entry)
        rows += entry.live_records or 0
    return chosen
