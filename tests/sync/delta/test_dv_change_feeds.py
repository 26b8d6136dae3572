"""Deletion-vector change feeds across Delta Kernel's 1,024-row read batches (issue 32 §4).

The official connector (``delta-sharing`` 1.4.2, ``use_delta_format=True``) reads change feeds
through ``delta-kernel-rust-sharing-wrapper`` 0.3.3, which pins ``delta_kernel`` 0.22.0. That
kernel applies a version's DV difference only to the first 1,024-row batch of each file
(``kernel/src/table_changes/scan.rs``; fixed by delta-kernel-rs PR #3077, released in 0.27.0):
every row past the first batch is reported as changed. So a ``DELETE … WHERE id = 0`` on a
2,000-row file comes back as 977 deletes (id 0 and ids 1024–1999). These tests keep that table:
sharesync's client, reading ``sharesync serve``, must report exactly the one delete, and UPDATEs
across files of more than 1,024 rows exactly their rows. The oracle is Sail reading the source
at each version (a Delta reader sharing no code with sharesync); the connector is a referee for
snapshots only (see :func:`test_the_connector_agrees_on_snapshots_only`).

Tables written by Sail (DV commits); change data feed crafted on afterwards, as Sail cannot turn it
on (:func:`sharesync.sync.server.samples.enable_change_data_feed`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import delta_sharing
import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.faults import SharingServer
from support.feature_tables import read_source

from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.server.samples import enable_change_data_feed
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.files import StageLayout

SHARE, SCHEMA = "dvcf", "s"
KERNEL_BATCH = 1024  # delta_kernel's default read batch size: the bug shows past it
DELTA = {"delta-sharing-capabilities": "responseformat=delta;readerfeatures=deletionvectors"}
# The UPDATE of ``updated``: ids in the first and in later 1,024-row batches of both files.
UPDATED_IDS = (3, 1100, 1499, 1500, 1600, 2800, 2999)


def _write(spark: Any, path: Path, ranges: list[tuple[int, int]]) -> None:
    for index, (start, stop) in enumerate(ranges):
        frame = spark.range(start, stop).selectExpr("id", "concat('row-', cast(id as string)) as s").coalesce(1)
        writer = frame.write.format("delta").mode("append" if index else "error")
        writer.option("delta.enableDeletionVectors", "true").save(str(path))


@pytest.fixture(scope="module")
def provider(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dv-change-feeds")
    single = root / SHARE / SCHEMA / "single"  # v0: one 2,000-row file; v1: DELETE id = 0
    _write(spark, single, [(0, 2000)])
    spark.sql(f"DELETE FROM delta.`{single}` WHERE id = 0")
    updated = root / SHARE / SCHEMA / "updated"  # v0, v1: two 1,500-row files; v2: UPDATE; v3: DELETE
    _write(spark, updated, [(0, 1500), (1500, 3000)])
    spark.sql(f"UPDATE delta.`{updated}` SET s = 'updated' WHERE id IN ({', '.join(map(str, UPDATED_IDS))})")
    spark.sql(f"DELETE FROM delta.`{updated}` WHERE id % 500 = 499")
    for path in (single, updated):
        enable_change_data_feed(path)
    return root


@pytest.fixture(scope="module")
def server(provider: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharingServer]:
    with SharingServer(provider) as running:
        running.write_profile(tmp_path_factory.mktemp("dvcf-profile") / "p.share")
        yield running


def _changes(server: SharingServer, name: str, start: int, end: int, directory: Path) -> pa.Table:
    """What sharesync's client stages for versions ``start..end``: the rows a sync applies. DV
    changes pair a file's ``remove`` and ``add`` by file id: the id scheme is asked for, and checked."""
    client = SharingClient(load_profile(server.profile_path), file_id_hash="delta")
    try:
        result = client.changes(f"{SHARE}.{SCHEMA}.{name}", starting_version=start, ending_version=end)
        layout = StageLayout.build(result.metadata.table_schema, result.metadata.partition_columns)
        files = batches.change_files(result, end)
        staged = batches.stage(client, result, files, layout, directory, concurrency=2)
    finally:
        client.close()
    parts = [pq.read_table(p) for p in sorted(Path(staged.path.path).glob("*.parquet"))]
    return pa.concat_tables(parts).select(["id", "s", "_change_type", "_commit_version"])


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter((r["id"], r["s"]) for r in table.select(["id", "s"]).to_pylist())


def _of(staged: pa.Table, version: int, kind: str) -> pa.Table:
    rows = staged.filter(pc.equal(staged["_commit_version"], version))
    return rows.filter(pc.equal(rows["_change_type"], kind))


def test_a_dv_delete_of_one_row_is_one_delete(server: SharingServer, provider: Path, tmp_path: Path) -> None:
    data = [a["add"] for a in _log(provider / SHARE / SCHEMA / "single", 0) if "add" in a]
    assert len(data) == 1 and json.loads(data[0]["stats"])["numRecords"] == 2000 > KERNEL_BATCH  # one file, > 1 batch
    staged = _changes(server, "single", 1, 1, tmp_path)
    assert staged.to_pylist() == [{"id": 0, "s": "row-0", "_change_type": "delete", "_commit_version": 1}]


def test_updates_across_files_larger_than_a_batch_change_exactly_their_rows(
    server: SharingServer, provider: Path, spark: Any, tmp_path: Path
) -> None:
    path = provider / SHARE / SCHEMA / "updated"
    staged = _changes(server, "updated", 2, 3, tmp_path)
    before = read_source(spark, path, 1)
    assert len(before) == 3000
    for version in (2, 3):
        after = read_source(spark, path, version)
        assert _rows(_of(staged, version, "delete")) == _rows(before) - _rows(after), version
        assert _rows(_of(staged, version, "insert")) == _rows(after) - _rows(before), version
        before = after
    assert sorted(r["id"] for r in _of(staged, 2, "delete").to_pylist()) == list(UPDATED_IDS)
    # ids 499 … 2999 step 500, from both large files and from the file the UPDATE wrote (1499, 2999)
    assert sorted(r["id"] for r in _of(staged, 3, "delete").to_pylist()) == list(range(499, 3000, 500))


def test_changes_keep_the_logs_line_order(server: SharingServer, provider: Path) -> None:
    """A DV commit writes ``remove`` before ``add``; the reference server keeps that order."""
    with httpx.Client(base_url=server.endpoint, headers={"Authorization": f"Bearer {server.token}"}) as http:
        url = f"/shares/{SHARE}/schemas/{SCHEMA}/tables/updated/changes"
        response = http.get(url, params={"startingVersion": 0}, headers=DELTA)
    assert response.status_code == 200, response.text
    served = [
        (line["file"]["version"], kind, urlsplit(action["path"]).path.rsplit("/", 1)[-1])  # presigned
        for line in map(json.loads, response.text.splitlines())
        if "file" in line
        for kind, action in line["file"]["deltaSingleAction"].items()
    ]
    logged = [
        (version, kind, action[kind]["path"].rsplit("/", 1)[-1])
        for version in range(4)
        for action in _log(provider / SHARE / SCHEMA / "updated", version)
        for kind in ("add", "remove")
        if kind in action and action[kind].get("dataChange", True)
    ]
    assert served == logged
    kinds = [kind for _, kind, _ in logged]
    assert kinds.index("remove") < len(kinds) - 1 - kinds[::-1].index("add")  # a remove precedes an add


def test_the_connector_agrees_on_snapshots_only(server: SharingServer, provider: Path, spark: Any) -> None:
    """The connector is a referee for DV tables' snapshots, never for their change feeds.

    Its change feed of a DV commit is wrong by construction (module docstring): it reports the
    977 rows below for a one-row delete, against this server and against any other, so comparing
    change feeds with it would only compare with ``delta_kernel`` 0.22.0's bug. When this count
    becomes 1, a wrapper on ``delta_kernel`` >= 0.27 is installed: re-check ``bench/``'s ``dv`` peer
    result and docs/dv-change-feeds.md.
    """
    url = f"{server.profile_path}#{SHARE}.{SCHEMA}.single"
    for version in (0, 1):
        got = delta_sharing.load_as_pandas(url, version=version, use_delta_format=True)
        expected = read_source(spark, provider / SHARE / SCHEMA / "single", version).to_pandas()
        assert Counter(zip(got["id"], got["s"], strict=True)) == Counter(
            zip(expected["id"], expected["s"], strict=True)
        )
    feed = delta_sharing.load_table_changes_as_pandas(url, starting_version=1, ending_version=1, use_delta_format=True)
    deleted = sorted(int(i) for i in feed.loc[feed["_change_type"] == "delete", "id"])
    assert deleted == [0, *range(KERNEL_BATCH, 2000)], "the connector's DV change feed changed: see the docstring"


def _log(table: Path, version: int) -> list[dict[str, Any]]:
    text = (table / "_delta_log" / f"{version:020d}.json").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]
