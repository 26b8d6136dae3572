"""User filters (``where: [{col, op, val}, …]``) as one typed tree and every function over it.

* :func:`bind` / :func:`parse_where`: predicates + table schema → :data:`Expr` (ConfigError if wrong)
* :func:`to_json_hints`, :func:`to_sql_hints`: best-effort server hints (never narrower than the filter)
* :func:`to_spark`, :func:`to_arrow`, :func:`evaluate`: exact filtering, SQL three-valued logic
* :func:`may_match`: may a file hold a matching row, given its partition values and stats?
* :func:`parse_partition_value`: the protocol's partition value strings → typed values

Spark and Arrow are imported only when :func:`to_spark` / :func:`to_arrow` are called.

Names are loaded on first use (PEP 562): ``sync.config`` needs only :mod:`sync.predicates.model`,
and importing it must not load the whole package (and the protocol models) on every command.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sync.predicates.arrow import to_arrow
    from sync.predicates.bind import bind, parse_where
    from sync.predicates.evaluate import evaluate
    from sync.predicates.expr import (
        FALSE,
        TRUE,
        AlwaysFalse,
        AlwaysTrue,
        And,
        CmpOp,
        Comparison,
        Expr,
        In,
        IsNotNull,
        IsNull,
        Leaf,
        Like,
        Literal,
        Not,
        Or,
        Ref,
        and_,
        columns_referenced,
        conjuncts,
        not_,
        or_,
        rewrite_not,
    )
    from sync.predicates.hints import to_json_hints, to_sql_hints
    from sync.predicates.model import Op, Predicate
    from sync.predicates.pruning import may_match
    from sync.predicates.spark import to_spark
    from sync.predicates.types import Kind, kind_of
    from sync.predicates.values import parse_partition_value

# exported name → submodule that defines it
_SOURCES: dict[str, str] = {
    "AlwaysFalse": "expr",
    "AlwaysTrue": "expr",
    "And": "expr",
    "CmpOp": "expr",
    "Comparison": "expr",
    "Expr": "expr",
    "FALSE": "expr",
    "In": "expr",
    "IsNotNull": "expr",
    "IsNull": "expr",
    "Kind": "types",
    "Leaf": "expr",
    "Like": "expr",
    "Literal": "expr",
    "Not": "expr",
    "Op": "model",
    "Or": "expr",
    "Predicate": "model",
    "Ref": "expr",
    "TRUE": "expr",
    "and_": "expr",
    "bind": "bind",
    "columns_referenced": "expr",
    "conjuncts": "expr",
    "evaluate": "evaluate",
    "kind_of": "types",
    "may_match": "pruning",
    "not_": "expr",
    "or_": "expr",
    "parse_partition_value": "values",
    "parse_where": "bind",
    "rewrite_not": "expr",
    "to_arrow": "arrow",
    "to_json_hints": "hints",
    "to_spark": "spark",
    "to_sql_hints": "hints",
}


def __getattr__(name: str) -> Any:
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{source}"), name)
    globals()[name] = value
    return value


class _Package(ModuleType):
    """``bind`` and ``evaluate`` are both a submodule and the function it defines; the package
    attribute is the function (as an eager ``from ... import`` made it), even after the
    submodule is imported and the import system tries to set the attribute to the module."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and _SOURCES.get(name) == name:
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


__all__ = [
    "FALSE",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "CmpOp",
    "Comparison",
    "Expr",
    "In",
    "IsNotNull",
    "IsNull",
    "Kind",
    "Leaf",
    "Like",
    "Literal",
    "Not",
    "Op",
    "Or",
    "Predicate",
    "Ref",
    "and_",
    "bind",
    "columns_referenced",
    "conjuncts",
    "evaluate",
    "kind_of",
    "may_match",
    "not_",
    "or_",
    "parse_partition_value",
    "parse_where",
    "rewrite_not",
    "to_arrow",
    "to_json_hints",
    "to_spark",
    "to_sql_hints",
]
