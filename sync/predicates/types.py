"""Delta column types, reduced to the few kinds that filters care about.

Every function over the tree (binding, hints, evaluation, pruning) branches on the *kind*
of a column, never on raw type strings, so the type vocabulary of the schema
(Delta Sharing protocol, "Primitive Types") is interpreted here only.
"""

from __future__ import annotations

import re
from enum import StrEnum
from functools import lru_cache


class Kind(StrEnum):
    BOOLEAN = "boolean"
    INTEGRAL = "integral"
    FLOAT = "float"  # 32-bit: literals and partition values are rounded to float32
    DOUBLE = "double"
    DECIMAL = "decimal"
    STRING = "string"
    DATE = "date"
    TIMESTAMP = "timestamp"  # an instant; literals are aware UTC datetimes
    TIMESTAMP_NTZ = "timestamp_ntz"  # wall-clock time; literals are naive datetimes


INTEGRAL_RANGES: dict[str, tuple[int, int]] = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "long": (-(2**63), 2**63 - 1),
}
_SIMPLE: dict[str, Kind] = {
    "boolean": Kind.BOOLEAN,
    "float": Kind.FLOAT,
    "double": Kind.DOUBLE,
    "string": Kind.STRING,
    "date": Kind.DATE,
    "timestamp": Kind.TIMESTAMP,
    "timestamp_ntz": Kind.TIMESTAMP_NTZ,
    **{name: Kind.INTEGRAL for name in INTEGRAL_RANGES},
}
_DECIMAL = re.compile(r"decimal(?:\((\d+)\s*,\s*(\d+)\))?")
MAX_DECIMAL_PRECISION = 38
SUPPORTED_TYPES = (
    "boolean, byte, short, integer, long, float, double, decimal(p,s), string, date, timestamp, timestamp_ntz"
)


@lru_cache(maxsize=256)
def kind_of(type_name: str) -> Kind | None:
    """The kind of a Delta type name, or None for types filters do not support
    (binary, struct, array, map, variant, …)."""
    name = type_name.strip().lower()
    if name in _SIMPLE:
        return _SIMPLE[name]
    if _DECIMAL.fullmatch(name):
        return Kind.DECIMAL
    return None
