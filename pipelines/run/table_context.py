"""What the batches of one table's pass share, and the one check of the config against the shared schema.

The check runs on the provider's current schema before anything is planned, and again on
each batch's schema before its files are downloaded (a batch of old versions may predate a
column), so a key or column the shared table lacks is a :class:`ConfigError` — named, with the
fix, exit 2 — and never a download wasted or a Spark job failing half-way.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.sync.core.config import TableConfig, check_tracked_columns
from sharesync.sync.core.errors import ConfigError
from sharesync.sync.predicates import Expr, ServerHints, columns_referenced, parse_where
from sharesync.sync.protocol.client import TableMetadata
from sharesync.sync.protocol.wire import StructType
from sharesync.sync.staging.files import StageLayout


@dataclass(frozen=True)
class TableContext:
    """Everything about one table that the batches of one pass share."""

    table: TableConfig
    metadata: TableMetadata
    expr: Expr | None  # the table's ``where``, bound to its schema
    layout: StageLayout  # the columns staged: all, or the configured ones plus keys and filter columns
    hints: ServerHints


def table_context(table: TableConfig, metadata: TableMetadata) -> TableContext:
    """The context of ``table`` given the provider's current metadata; ConfigError if they disagree."""
    schema = metadata.metadata.table_schema
    check_columns(table, schema)
    expr = parse_where(table.where, schema, table=table.name) if table.where else None
    keep: list[str] | None = None
    if table.columns is not None:
        needed = {n.lower() for n in [*table.keys, *table.columns, *(columns_referenced(expr) if expr else ())]}
        keep = [f.name for f in schema.fields if f.name.lower() in needed]
    layout = StageLayout.build(schema, metadata.partition_columns, keep)
    return TableContext(table, metadata, expr, layout, ServerHints.of(expr, metadata.partition_columns))


def check_columns(table: TableConfig, schema: StructType, *, version: int | None = None) -> None:
    """ConfigError naming each configured key, column or tracked column that ``schema`` lacks
    (names match in any case)."""
    at = f" at version {version}" if version is not None else ""
    for option, names in (("keys", table.keys), ("columns", table.columns or ())):
        missing = [n for n in names if schema.field(n) is None]
        if missing:
            raise ConfigError(
                f"tables[{table.name}].{option}: {missing} not in the shared table's columns{at} "
                f"({', '.join(schema.names)}); fix '{option}' in the config"
            )
    check_tracked_columns(table, schema.names, version=version)
