"""Decide whether a target can follow the source schema: unchanged, additive, or breaking.

Pure: both sides are given as Spark/Delta JSON schemas (``StructType.jsonValue()`` on the
engine side, ``deltalake.Schema.to_json()`` on the Delta log side — the Delta protocol stores
schemas in exactly Spark's JSON form), so the decision needs neither an engine nor I/O and
is unit-tested without one.

Rules, chosen so a sync never rewrites or loses data silently:

* a column only in the source is *additive*: the target gains it as a nullable column and old
  rows read NULL (Delta cannot add a NOT NULL column to a table that has rows, so source
  nullability is not part of the decision);
* a column whose type the provider *widened* (Delta type widening: ``integer`` → ``long``,
  ``date`` → ``timestamp_ntz``, …, :func:`~sharesync.sync.delta.type_widening.is_widening`) is
  widened in the target too (:mod:`sharesync.pipelines.jobs.widening`): every old value fits the new type, nothing narrows;
* a column only in the target (dropped upstream, or removed from ``columns``) or a column whose
  type changed otherwise is *breaking*: nothing is written and :class:`SchemaIncompatible` tells
  the user to re-bootstrap with ``sharesync reset`` or to get the provider to restore the column;
* names compare case-insensitively, as Spark and Delta resolve them; nested types compare by
  structure, ignoring field metadata and nullability flags (Sail adds metadata on write).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sharesync.sync.core.errors import SchemaIncompatible
from sharesync.sync.delta.type_widening import is_widening

__all__ = ["SchemaChange", "SchemaDiff", "check_schema", "compare_schema", "fields_of"]

JsonSchema = Mapping[str, Any]  # {"type": "struct", "fields": [{"name", "type", "nullable", "metadata"}]}


@dataclass(frozen=True)
class SchemaChange:
    """What the target must gain to hold the source rows; empty ``added`` = nothing to do."""

    added: tuple[tuple[str, Any], ...] = ()  # (column name, Spark JSON type) in source order
    widened: tuple[tuple[str, str], ...] = ()  # (target column name, the wider Spark type name)

    @property
    def is_additive(self) -> bool:
        return bool(self.added)

    @property
    def added_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.added)


def fields_of(schema: JsonSchema, *, exclude: Sequence[str] = ()) -> dict[str, Any]:
    """``{column name: normalised JSON type}`` of a struct schema, in schema order."""
    skip = {name.lower() for name in exclude}
    return {
        field["name"]: _normalise(field["type"])
        for field in schema.get("fields", [])
        if field["name"].lower() not in skip
    }


@dataclass(frozen=True)
class SchemaDiff:
    """Every difference between target and source, breaking or not (see the module docstring)."""

    added: tuple[tuple[str, Any], ...] = ()
    widened: tuple[tuple[str, str], ...] = ()
    dropped: tuple[str, ...] = ()  # target columns the source lacks
    changed: tuple[tuple[str, Any, Any], ...] = ()  # (target column, old type, new type), not widenings

    @property
    def problems(self) -> list[str]:
        """The breaking differences, one phrase each (empty: the target can follow)."""
        found = [f"column '{name}' is missing from the new data" for name in self.dropped]
        return found + [f"column '{name}' changed type {_show(old)} -> {_show(new)}" for name, old, new in self.changed]


def compare_schema(target: Mapping[str, Any], source: Mapping[str, Any]) -> SchemaDiff:
    """Compare ``{name: type}`` maps (see :func:`fields_of`), never raising."""
    target_by_lower = {name.lower(): (name, kind) for name, kind in target.items()}
    source_lower = {name.lower() for name in source}
    changed = [
        (target_by_lower[name.lower()][0], target_by_lower[name.lower()][1], kind)
        for name, kind in source.items()
        if name.lower() in target_by_lower and target_by_lower[name.lower()][1] != kind
    ]
    return SchemaDiff(
        added=tuple((name, kind) for name, kind in source.items() if name.lower() not in target_by_lower),
        widened=tuple((name, new) for name, old, new in changed if _widens(old, new)),
        dropped=tuple(name for name in target if name.lower() not in source_lower),
        changed=tuple((name, old, new) for name, old, new in changed if not _widens(old, new)),
    )


def check_schema(target: Mapping[str, Any], source: Mapping[str, Any], *, where: str = "the target") -> SchemaChange:
    """Compare ``{name: type}`` maps (see :func:`fields_of`); raise if the change is breaking."""
    diff = compare_schema(target, source)
    if diff.problems:
        change = "; ".join(diff.problems)
        raise SchemaIncompatible(
            f"breaking schema change for {where}: {change}. Nothing was written. "
            "Run 'sharesync reset' for this table to re-bootstrap the target from a fresh snapshot, "
            "set 'on_breaking_change: rebuild' for it, or ask the provider to restore the column "
            "(or fix 'columns' in the config).",
            change=change,
        )
    return SchemaChange(added=diff.added, widened=diff.widened)


def _widens(old: Any, new: Any) -> bool:
    return isinstance(old, str) and isinstance(new, str) and is_widening(old, new)


def _normalise(kind: Any) -> Any:
    """Drop what does not change the stored values: field metadata and nullability flags."""
    if isinstance(kind, str):
        return kind
    if isinstance(kind, Mapping):
        return {
            key: [_normalise(field) for field in value] if key == "fields" else _normalise(value)
            for key, value in kind.items()
            if key not in {"metadata", "nullable", "containsNull", "valueContainsNull"}
        }
    return kind


def _show(kind: Any) -> str:
    return kind if isinstance(kind, str) else json.dumps(kind, separators=(",", ":"))
