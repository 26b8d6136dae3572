"""A target's rows as ``deltalake`` reads them, deletion vectors honoured: the one reader of target data.

Targets are merge-on-read (deletion vectors on, :mod:`sharesync.pipelines.targets.delta.write`), and
``deltalake`` 1.6's ``to_pyarrow_table``/``to_pyarrow_dataset`` refuse such tables; its
``QueryBuilder`` (DataFusion) reads them correctly, column-mapped ones too. So every read of a
target's rows — checks, ``verify``, ``preview``, the demo, history planning, the bench and the
tests — goes through :func:`read_rows`, and no caller needs to know whether the table has DVs.
The file statistics in the log count rows a DV has deleted: :func:`has_deletion_vectors` says
when they can no longer be summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.open import open_target
from sharesync.sync.core.location import Location

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

__all__ = ["count_rows", "has_deletion_vectors", "hidden_rows", "max_of", "quoted", "read_rows"]

_DV_FEATURE = "deletionVectors"


def read_rows(target: Location | DeltaTable, columns: Sequence[str] = (), where: str | None = None) -> pa.Table:
    """The live rows of the table's current version (``columns`` of them, in that order; all when
    none are named), filtered by ``where``, a SQL condition (DataFusion's dialect: :func:`quoted` names).

    Arrow types as ``to_pyarrow_table`` gives them: DataFusion's view types are cast back to
    plain strings and binaries, and column-mapping metadata is left off the fields.
    """
    import pyarrow as pa

    names = ", ".join(quoted(c) for c in columns) if columns else "*"
    rows = pa.table(_query(target, f"SELECT {names} FROM t" + (f" WHERE {where}" if where else "")))
    return rows.cast(_plain_schema(rows.schema))


def count_rows(target: Location | DeltaTable, where: str | None = None) -> int:
    """Live rows of the table's current version (matching ``where``)."""
    import pyarrow as pa

    sql = "SELECT count(*) AS n FROM t" + (f" WHERE {where}" if where else "")
    return int(pa.table(_query(target, sql)).column("n")[0].as_py())


def hidden_rows(table: DeltaTable) -> tuple[int, int]:
    """(files with a deletion vector, rows those vectors delete), from the deletion-vector files
    alone: no data is read, so the cost follows the files batches touched, not the table's size."""
    import pyarrow as pa
    import pyarrow.compute as pc

    vectors = pa.table(table.deletion_vectors())
    if not vectors.num_rows:
        return 0, 0
    kept = pc.list_flatten(vectors.column("selection_vector"))  # True: the row is live
    return vectors.num_rows, len(kept) - int(pc.sum(kept).as_py() or 0)


def max_of(target: Location | DeltaTable, column: str) -> object:
    """The largest value of ``column`` among the live rows (None: no rows, or all NULL), computed
    by the query engine: one value back, not the column."""
    import pyarrow as pa

    return pa.table(_query(target, f"SELECT max({quoted(column)}) AS m FROM t")).column("m")[0].as_py()


def has_deletion_vectors(table: DeltaTable) -> bool:
    """Whether the table's files may carry deletion vectors (its protocol has the reader feature)."""
    return _DV_FEATURE in (table.protocol().reader_features or ())


def quoted(name: str) -> str:
    """``name`` as a SQL identifier (case kept, any character)."""
    return '"' + name.replace('"', '""') + '"'


def _query(target: Location | DeltaTable, sql: str) -> pa.RecordBatchReader:
    from deltalake import QueryBuilder

    table = open_target(target) if isinstance(target, Location) else target
    return QueryBuilder().register("t", table).execute(sql)


def _plain_schema(schema: pa.Schema) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([pa.field(f.name, _plain(f.type), f.nullable) for f in schema])


def _plain(kind: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    if kind == pa.string_view():
        return pa.string()
    if kind == pa.binary_view():
        return pa.binary()
    if pa.types.is_struct(kind):
        return pa.struct([pa.field(f.name, _plain(f.type), f.nullable) for f in kind])
    if pa.types.is_large_list(kind):
        return pa.large_list(pa.field(kind.value_field.name, _plain(kind.value_type), kind.value_field.nullable))
    if pa.types.is_list(kind):
        return pa.list_(pa.field(kind.value_field.name, _plain(kind.value_type), kind.value_field.nullable))
    if pa.types.is_map(kind):
        return pa.map_(_plain(kind.key_type), _plain(kind.item_type), kind.keys_sorted)
    return kind
