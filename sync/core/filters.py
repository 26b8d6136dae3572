"""The user-facing filter format: a list of ``{col, op, val}`` predicates, ANDed.

The format: a list of ``{col, op, val}`` objects. The operator set is closed; values are
checked for shape here (scalar, non-empty list, or absent) and for type against the table
schema later, when the schema is known (:func:`sharesync.sync.predicates.bind`).
"""

from __future__ import annotations

from datetime import date
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

Scalar = str | int | float | bool | date
"""``date`` covers YAML's unquoted dates and timestamps (``datetime`` is a ``date``)."""


class Op(StrEnum):
    EQ = "eq"
    NEQ = "neq"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"
    LIKE = "like"
    ILIKE = "ilike"
    IN = "in"
    IS_NULL = "is_null"
    IS_NOT_NULL = "is_not_null"


COMPARISONS = frozenset({Op.EQ, Op.NEQ, Op.GT, Op.GTE, Op.LT, Op.LTE})
NULL_CHECKS = frozenset({Op.IS_NULL, Op.IS_NOT_NULL})
PATTERNS = frozenset({Op.LIKE, Op.ILIKE})


class Predicate(BaseModel):
    """One ``{col, op, val}`` predicate with its value shape validated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    col: str
    op: Op
    val: Any = None

    @model_validator(mode="after")
    def _check_value_shape(self) -> Predicate:
        if not self.col.strip():
            raise ValueError("'col' must name a column")
        if self.op in NULL_CHECKS:
            if self.val is not None:
                raise ValueError(f"op '{self.op}' takes no 'val'; omit it or set it to null")
        elif self.op is Op.IN:
            if not isinstance(self.val, list) or not self.val:
                raise ValueError("op 'in' needs 'val' to be a non-empty list of scalars, e.g. [eu, us]")
            for item in self.val:
                _require_scalar(item, self.op)
        elif self.op in PATTERNS:
            if not isinstance(self.val, str):
                raise ValueError(f"op '{self.op}' needs a string pattern in 'val' (use % and _ wildcards)")
        else:
            _require_scalar(self.val, self.op)
        return self


def _require_scalar(value: Any, op: Op) -> None:
    if value is None:
        raise ValueError(f"op '{op}' needs a 'val'; to match nulls use op 'is_null'")
    if not isinstance(value, str | int | float | bool | date):
        raise ValueError(  # noqa: TRY004 - pydantic reports ValueError (not TypeError) as a validation error
            f"op '{op}' needs a scalar 'val' (string, number, boolean or date), got {type(value).__name__}"
        )
