"""Type widening: which type changes a Delta table may have made, and checking the ones it records.

Delta PROTOCOL.md, "Type Widening": a column may change to a wider type (``integer`` → ``long``,
``float`` → ``double``, ``date`` → ``timestamp_ntz``, decimals gaining precision, …); files
written before the change keep the narrower physical type, and a reader "must convert such
values to the current, wider type" — staging's cast to the table's schema does exactly that,
since every change listed here is a lossless Arrow cast. A reader must also fail on any change in
``delta.typeChanges`` it does not support (:func:`check_type_changes`). The same rule decides
whether a target column may follow a provider's change (``pipelines/targets/schema_evolution``):
one piece of code says what "wider" means.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from sharesync.sync.core.errors import UnsupportedTableFeature

TYPE_CHANGES_KEY = "delta.typeChanges"
_INTEGERS = ("byte", "short", "integer", "long")
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")
_INTEGER_DIGITS = {"byte": 10, "short": 10, "integer": 10, "long": 20}  # decimal(10 + k1, k2), decimal(20 + k1, k2)


def _decimal(kind: str) -> tuple[int, int] | None:
    match = _DECIMAL.match(kind.strip())
    return (int(match.group(1)), int(match.group(2))) if match else None


def is_widening(from_type: str, to_type: str) -> bool:
    """True when the protocol allows changing ``from_type`` to ``to_type`` (Delta type names)."""
    source, target = from_type.strip().lower(), to_type.strip().lower()
    if source in _INTEGERS and target in _INTEGERS:
        return _INTEGERS.index(source) < _INTEGERS.index(target)
    if target == "double" and source in ("float", "byte", "short", "integer"):
        return True
    if (source, target) == ("date", "timestamp_ntz"):
        return True
    wide = _decimal(target)
    if wide is None:
        return False
    narrow = _decimal(source)
    if narrow is not None:  # decimal(p, s) -> decimal(p + k1, s + k2), k1 >= k2 >= 0
        k1, k2 = wide[0] - narrow[0], wide[1] - narrow[1]
        return k1 >= k2 >= 0 and (k1, k2) != (0, 0)
    digits = _INTEGER_DIGITS.get(source)  # integer -> decimal(digits + k1, k2), k1 >= k2 >= 0
    return digits is not None and wide[0] - digits >= wide[1] >= 0


def _recorded(fields: list[Mapping[str, Any]], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(column path, one ``delta.typeChanges`` entry) for every field of a schema, nested ones too."""
    for field in fields:
        name = f"{path}{field.get('name')}"
        changes = (field.get("metadata") or {}).get(TYPE_CHANGES_KEY) or []
        for change in changes if isinstance(changes, list) else [changes]:
            yield name, change if isinstance(change, Mapping) else {}
        yield from _nested(field.get("type"), f"{name}.")


def _nested(kind: object, path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if not isinstance(kind, Mapping):
        return
    if kind.get("type") == "struct":
        yield from _recorded(list(kind.get("fields") or []), path)
    for child in ("elementType", "keyType", "valueType"):
        yield from _nested(kind.get(child), path)


def check_type_changes(schema: Mapping[str, Any], *, table: str) -> None:
    """Raise naming the first recorded type change that is not a widening sharesync reads.

    Only primitive changes exist in the protocol; one whose types are not strings (or that is
    no widening at all) means the table holds files this reader cannot convert.
    """
    for column, change in _recorded(list(schema.get("fields") or [])):
        source, target = change.get("fromType"), change.get("toType")
        where = f" (at {change['fieldPath']})" if change.get("fieldPath") else ""
        if not (isinstance(source, str) and isinstance(target, str) and is_widening(source, target)):
            raise UnsupportedTableFeature(
                f"table {table} records a type change of column '{column}'{where} from {source!r} to {target!r}, "
                "which is not a type widening sharesync can read (Delta protocol, 'Type Widening'); "
                "ask the provider to rewrite the table's files with the current types"
            )
