"""The benchmark's table shapes: which columns a provider table has, how big it is, how it changes.

The shapes (:data:`SHAPES`): ``narrow`` (5 columns, 3 partitions — the table issue 16 measured
from outside), ``wide-strings`` (14 string columns, unpartitioned), ``small`` (100 k rows: fixed
costs dominate), ``M``/``L`` (one column per protocol primitive type, 1 M / 5 M rows), ``dv`` (M
with deletion vectors) and the size curve ``xl-1m`` … ``xl-50m``. ``Shape.scaled(0.05)`` shrinks
rows and changed keys alike, for smoke runs. :mod:`bench.workload` turns a shape into a table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import columns as c


@dataclass(frozen=True)
class Column:
    name: str
    build: c.Builder
    nulls: float = 0.0  # share of null values


@dataclass(frozen=True)
class Shape:
    """A provider table's columns, size and change pattern. The key is always ``id`` (int64)."""

    name: str  # CLI name (--shape)
    table: str  # table name prefix: <table>_<rows>
    rows: int
    versions: int
    change_rows: int  # keys per change version
    columns: tuple[Column, ...]  # after ``id``
    partition_by: tuple[str, ...]
    updates: Mapping[str, str]  # SET clause of the range updates
    merge_existing_pct: int  # share of a merge's source rows that hit existing keys
    merge_delete: tuple[str, float]  # matched rows with s.<column> < <value> are deleted
    deletion_vectors: bool = False  # written by Sail with deletion vectors (bench.dv_writer), no MERGEs
    merges: bool = True  # False: appends, range updates and range deletes only (the XL shapes)
    pattern: str = "mixed"  # the change versions' kinds: a key of bench.generate.PATTERNS

    def scaled(self, factor: float) -> Shape:
        if factor == 1:
            return self
        return dataclasses.replace(
            self, rows=max(100, round(self.rows * factor)), change_rows=max(10, round(self.change_rows * factor))
        )

    def params(self) -> dict[str, object]:
        """What the generated data depends on (the cache key)."""
        return {
            "shape": self.name, "rows": self.rows, "versions": self.versions, "change_rows": self.change_rows,
            "partition_by": self.partition_by, "updates": dict(self.updates),
            "merge_existing_pct": self.merge_existing_pct, "merge_delete": self.merge_delete,
            **({"deletion_vectors": True} if self.deletion_vectors else {}),
            **({} if self.merges else {"merges": False}),
            **({} if self.pattern == "mixed" else {"pattern": self.pattern}),
        }  # fmt: skip


_ALL_TYPES = (  # one column per protocol primitive type (sharesync.sync.server.samples.SAMPLE_SCHEMA)
    Column("region", c.choice(("eu", "us", "apac", "latam", "mea"))),
    Column("qty", c.ints(-1000, 1001, np.int32), 0.1),
    Column("small", c.ints(-32768, 32768, np.int16), 0.1),
    Column("tiny", c.ints(-128, 128, np.int8), 0.1),
    Column("price", c.floats(-1e6, 1e6, 6), 0.1),
    Column("ratio", c.floats(0, 1, 3, np.float32), 0.1),
    Column("amount", c.decimal, 0.1),
    Column("name", c.label(c.WORDS), 0.1),
    Column("active", c.bools, 0.1),
    Column("day", c.days, 0.1),
    Column("updated_at", c.timestamps, 0.1),
    Column("payload", c.binary, 0.1),
)
_ALL_TYPES_CHANGES = {
    "partition_by": ("region",),
    "updates": {"qty": "qty + 1", "name": "'updated'", "price": "price * 2"},
    "merge_existing_pct": 70,
    "merge_delete": ("qty", -900.0),
}

SHAPES: dict[str, Shape] = {  # name, table, rows, versions, change rows, columns, …
    "narrow": Shape(
        "narrow",
        "narrow",
        1_000_000,
        30,
        50_000,
        (
            Column("region", c.choice(("eu", "us", "apac"))),
            Column("amount", c.floats(0, 10_000, 2)),
            Column("status", c.choice(("open", "paid", "shipped", "cancelled", "returned"))),
            Column("note", c.text(4), 0.5),
        ),
        partition_by=("region",),
        updates={"amount": "amount * 1.1", "status": "'revised'"},
        merge_existing_pct=50,
        merge_delete=("amount", 500.0),
    ),
    "wide-strings": Shape(
        "wide-strings",
        "strings",
        500_000,
        30,
        25_000,
        (
            Column("country", c.choice(tuple(f"C{i:02d}" for i in range(40)))),
            Column("currency", c.choice(("EUR", "USD", "GBP", "JPY", "CHF", "BRL", "INR", "AUD"))),
            Column("channel", c.choice(("web", "store", "phone", "partner", "marketplace"))),
            Column("status_code", c.choice(("NEW", "OPEN", "HOLD", "PAID", "SHIPPED", "CLOSED")), 0.05),
            Column("customer", c.label(c.WORDS)),
            Column("email", c.label(("ann", "bob", "cy", "dee", "eve", "fay", "gus", "hal"), "@")),
            Column("city", c.choice(tuple(f"city-{i}" for i in range(200))), 0.1),
            Column("sku", c.label(("SKU", "ART", "REF"), "/")),
            Column("order_ref", c.hex32),
            Column("session_id", c.hex32, 0.2),
            Column("trace_id", c.hex32, 0.5),
            Column("description", c.text(8), 0.1),
            Column("comment", c.text(12), 0.3),
            Column("address", c.text(5), 0.1),
            Column("amount", c.floats(0, 10_000, 2)),
            Column("updated_at", c.timestamps),
        ),
        partition_by=(),
        merge_existing_pct=50,
        merge_delete=("amount", 500.0),
        updates={"status_code": "'REVISED'", "comment": "concat(comment, ' (edited)')", "amount": "amount + 1"},
    ),
    "small": Shape("small", "orders", 100_000, 10, 5_000, _ALL_TYPES, **_ALL_TYPES_CHANGES),
    "M": Shape("M", "orders", 1_000_000, 30, 50_000, _ALL_TYPES, **_ALL_TYPES_CHANGES),
    "L": Shape("L", "orders", 5_000_000, 30, 50_000, _ALL_TYPES, **_ALL_TYPES_CHANGES),
    # M with deletion vectors, as Databricks shares tables by default (issue 12): deletes and
    # updates are DV commits, read by both pipelines through the delta response format.
    "dv": Shape("dv", "orders_dv", 1_000_000, 30, 50_000, _ALL_TYPES, deletion_vectors=True, **_ALL_TYPES_CHANGES),
}
# Issues 34 and 42, "incremental cost follows the change, not the table": narrow's columns at
# growing sizes, the same change volume at every size — 10 versions × 50 k keys of appends, range
# updates and range deletes (``xl-<size>``), or of one pattern a real provider produces
# (``xl-<size>-<pattern>``: range updates of the newest keys, updates of keys scattered over the
# whole table, appends only, range deletes only). Not in ``--shape all``; ``--shape xl`` = xl-1m,
# xl-5m, xl-20m; ``--shape xl-patterns`` = the four patterns at those sizes; the rest by name.
_XL_ROWS = {"1m": 1_000_000, "5m": 5_000_000, "10m": 10_000_000, "20m": 20_000_000, "50m": 50_000_000}
XL_PATTERNS = ("range-updates", "random-updates", "appends", "deletes")
for _size, _rows in _XL_ROWS.items():
    SHAPES[f"xl-{_size}"] = dataclasses.replace(
        SHAPES["narrow"], name=f"xl-{_size}", table="ranges", rows=_rows, versions=10, merges=False
    )
    for _pattern in XL_PATTERNS:
        SHAPES[f"xl-{_size}-{_pattern}"] = dataclasses.replace(
            SHAPES[f"xl-{_size}"], name=f"xl-{_size}-{_pattern}", table=f"ranges_{_pattern.replace('-', '_')}",
            pattern=_pattern,
        )  # fmt: skip
XL_SHAPES = tuple(name for name in SHAPES if name.startswith("xl-"))


def make_rows(shape: Shape, rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """Rows of ``shape`` for ``ids``; ``id`` is never null, every other column nullable."""
    ids = ids.astype(np.int64)
    arrays, fields = [pa.array(ids)], [pa.field("id", pa.int64(), nullable=False)]
    for column in shape.columns:
        values = column.build(rng, ids)
        if column.nulls:
            mask = pa.array(rng.random(len(ids)) < column.nulls)
            values = pc.if_else(mask, pa.scalar(None, values.type), values)
        arrays.append(values)
        fields.append(pa.field(column.name, values.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
