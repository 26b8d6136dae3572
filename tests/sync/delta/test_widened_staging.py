"""Staging files of a table whose columns were widened: narrow files read as the current, wider type.

Delta PROTOCOL.md, "Type Widening": readers "must convert such values to the current, wider type"
and "fail when finding any unsupported type change". Version 0 is written by Sail with narrow
columns; version 1 widens five of them — crafted, as no available writer can (Sail has no ALTER
TABLE, ``deltalake`` refuses type-widening tables); version 2 is a Sail append in the wide types.
Expected rows: Sail's read of version 0 cast by pyarrow (every widening is exact there), plus
the rows version 2 added as Sail reads them from its wide file.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.faults import SharingServer
from support.feature_tables import commit, create_source, read_source, widen_columns

from sharesync.sync.core.errors import UnsupportedTableFeature
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.files import StageLayout

SHARE, SCHEMA, NAME = "wd", "s", "w"
WIDENED = {"qty": "long", "tiny": "short", "small": "double", "ratio": "double", "amount": "decimal(14,4)",
           "day": "timestamp_ntz"}  # fmt: skip


@pytest.fixture(scope="module")
def provider(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("widened")
    path = create_source(spark, root / SHARE / SCHEMA / NAME, dvs=False, mapping=False, partitioned=False, rows=30)
    assert widen_columns(path, WIDENED) == 1
    assert commit(spark, path, random.Random(7), 1) == ["append"]
    return root


def _expected(spark: Any, path: Path) -> pa.Table:
    latest = read_source(spark, path, 2)
    narrow = read_source(spark, path, 0)
    added = latest.filter(pc.invert(pc.is_in(latest["id"], narrow["id"])))
    assert len(narrow) == 30 and len(added) > 0
    return pa.concat_tables([narrow.select(latest.schema.names).cast(latest.schema), added])


def _stage(client: SharingClient, result: Any, files: list[Any], directory: Path, **options: Any) -> pa.Table:
    layout = StageLayout.build(result.metadata.table_schema, result.metadata.partition_columns)
    staged = batches.stage(client, result, files, layout, directory, concurrency=2, **options)
    return pa.concat_tables([pq.read_table(p) for p in sorted(Path(staged.path.path).glob("*.parquet"))])


def _rows(table: pa.Table, names: list[str]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r[n] for n in names) for r in table.select(names).to_pylist())


def test_a_snapshot_and_a_change_feed_read_narrow_files_as_the_wider_type(
    provider: Path, spark: Any, tmp_path: Path
) -> None:
    path = provider / SHARE / SCHEMA / NAME
    first = [
        a["add"]["path"]
        for a in map(json.loads, (path / "_delta_log" / f"{0:020d}.json").read_text().splitlines())
        if "add" in a
    ]
    narrow_types = pq.read_schema(path / first[0])
    expected = _expected(spark, path)
    names = sorted(expected.column_names)
    with SharingServer(provider) as server:
        client = SharingClient(load_profile(server.write_profile(tmp_path / "p.share")))
        result = client.query(f"{SHARE}.{SCHEMA}.{NAME}")
        snapshot = _stage(client, result, batches.snapshot_change_files(result), tmp_path / "s", snapshot=True)
        changes = client.changes(f"{SHARE}.{SCHEMA}.{NAME}", starting_version=0, ending_version=2)
        feed = _stage(client, changes, batches.change_files(changes, 2), tmp_path / "c")
        client.close()
    assert narrow_types.field("qty").type == pa.int32()  # a file of version 0 still holds the narrow type
    assert {n: str(snapshot.schema.field(n).type) for n in WIDENED} == {
        "qty": "int64", "tiny": "int16", "small": "double", "ratio": "double", "amount": "decimal128(14, 4)",
        "day": "timestamp[us]",
    }  # fmt: skip
    assert _rows(snapshot, names) == _rows(expected, names)
    assert set(feed["_change_type"].to_pylist()) == {"insert"}
    assert _rows(feed, names) == _rows(expected, names)


def test_a_recorded_change_that_is_no_widening_fails_the_table_by_name(provider: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(provider / SHARE / SCHEMA / NAME, copy / SHARE / SCHEMA / NAME)
    widen_columns(copy / SHARE / SCHEMA / NAME, {"name": "long"})  # string -> long: no widening
    with SharingServer(copy) as server:
        client = SharingClient(load_profile(server.write_profile(tmp_path / "p.share")))
        with pytest.raises(UnsupportedTableFeature, match="type change of column 'name' from 'string' to 'long'"):
            client.query(f"{SHARE}.{SCHEMA}.{NAME}")
        client.close()
