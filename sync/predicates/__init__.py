"""User filters (``where: [{col, op, val}, …]``) as one typed tree and every function over it.

* :func:`bind` / :func:`parse_where`: predicates + table schema → :data:`Expr` (ConfigError if wrong)
* :class:`ServerHints`, :func:`to_json_hints`, :func:`to_sql_hints`: best-effort server hints (never narrower than the filter)
* :func:`to_spark`, :func:`to_arrow`, :func:`evaluate`: exact filtering, SQL three-valued logic
* :func:`may_match`: may a file hold a matching row, given its partition values and stats?
* :func:`parse_partition_value`: the protocol's partition value strings → typed values

Spark and Arrow are imported only when :func:`to_spark` / :func:`to_arrow` are called.
"""

from sharesync.sync.core.filters import Op, Predicate
from sharesync.sync.predicates.arrow import to_arrow
from sharesync.sync.predicates.bind import bind, parse_where
from sharesync.sync.predicates.evaluate import evaluate
from sharesync.sync.predicates.expr import (
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
from sharesync.sync.predicates.hints import ServerHints, to_json_hints, to_sql_hints
from sharesync.sync.predicates.pruning import may_match
from sharesync.sync.predicates.spark import to_spark
from sharesync.sync.predicates.types import Kind, kind_of
from sharesync.sync.predicates.values import parse_partition_value

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
    "ServerHints",
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
