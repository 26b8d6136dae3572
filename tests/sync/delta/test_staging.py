"""Staging files of Sail-written tables with deletion vectors and column mapping, served by the local server.

The staged rows must be the rows Sail reads from the source: a snapshot without the rows its DVs
delete, and per version exactly the rows that version changed (never a whole file deleted and
inserted again). DV files are fetched once per ``deletionVectorFileId``, renewed when their URLs
expire, and checked before any data file is downloaded. Inline DVs and ``id`` column mapping are
crafted into copies of the logs (Sail writes neither).
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from support.faults import SharingServer
from support.feature_tables import commit, create_source, latest_version, read_source, z85_encode

from sharesync.sync.core.changefeed import ChangeType
from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.properties import DeletionVectorDescriptor
from sharesync.sync.delta.z85 import z85_decode
from sharesync.sync.predicates import parse_where
from sharesync.sync.protocol.addresses import FileUrlPolicy
from sharesync.sync.protocol.changes import select_change_files, snapshot_files
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.download import Downloader, DownloadOptions
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.protocol.refresh import refresher_for
from sharesync.sync.protocol.wire import AddFile, File, Metadata, RemoveFile
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.deletions import load_deletion_vectors
from sharesync.sync.staging.files import StageLayout
from sharesync.sync.staging.first_rows import preview

SHARE, SCHEMA = "st", "s"
TABLES = {"dv": (True, False, False), "dvcm": (True, True, True)}  # name: (DVs, column mapping, partitioned)


class Recording(httpx.AsyncBaseTransport):
    """A real transport that records the path of every download (kept open across download calls,
    each of which runs its own event loop: one inner transport per loop)."""

    def __init__(self) -> None:
        self.inner: dict[asyncio.AbstractEventLoop, httpx.AsyncHTTPTransport] = {}
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        inner = self.inner.setdefault(asyncio.get_running_loop(), httpx.AsyncHTTPTransport())
        return await inner.handle_async_request(request)

    async def aclose(self) -> None:
        pass


@pytest.fixture(scope="module")
def provider(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("staging-provider")
    for seed, (name, (dvs, mapping, partitioned)) in enumerate(TABLES.items()):
        path = create_source(spark, root / SHARE / SCHEMA / name, dvs=dvs, mapping=mapping, partitioned=partitioned,
                             rows=40, seed=seed)  # fmt: skip
        commit(spark, path, random.Random(seed), 6)  # two appends, two DV deletes, two DV updates
    return root


@pytest.fixture
def served(provider: Path, tmp_path: Path) -> Iterator[tuple[SharingServer, SharingClient]]:
    with SharingServer(provider) as server:
        client = SharingClient(load_profile(server.write_profile(tmp_path / "p.share")))
        yield server, client
        client.close()


def _stage(client: SharingClient, result: Any, files: list[Any], directory: Path, **options: Any) -> pa.Table:
    layout = StageLayout.build(result.metadata.table_schema, result.metadata.partition_columns)
    staged = batches.stage(client, result, files, layout, directory, concurrency=4, **options)
    parts = [pq.read_table(p) for p in sorted(Path(staged.path.path).glob("*.parquet"))]
    return pa.concat_tables(parts) if parts else layout.target.empty_table()


def _rows(table: pa.Table, names: list[str]) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r[n] for n in names) for r in table.select(names).to_pylist())


@pytest.mark.parametrize("name", sorted(TABLES))
@pytest.mark.parametrize("version", [None, 2, 4])
def test_a_snapshot_stages_the_rows_sail_reads(
    served: tuple[SharingServer, SharingClient],
    spark: Any,
    provider: Path,
    tmp_path: Path,
    name: str,
    version: int | None,
) -> None:
    _, client = served
    result = client.query(f"{SHARE}.{SCHEMA}.{name}", version=version)
    assert result.response_format == "delta"
    staged = _stage(client, result, batches.snapshot_change_files(result), tmp_path, snapshot=True)
    source = read_source(spark, provider / SHARE / SCHEMA / name, result.version)
    names = sorted(source.column_names)
    assert _rows(staged, names) == _rows(source, names)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_each_version_stages_exactly_the_rows_it_changed(
    served: tuple[SharingServer, SharingClient], spark: Any, provider: Path, tmp_path: Path, name: str
) -> None:
    _, client = served
    path = provider / SHARE / SCHEMA / name
    end = latest_version(path)
    result = client.changes(f"{SHARE}.{SCHEMA}.{name}", starting_version=1, ending_version=end)
    recording = Recording()
    files = batches.change_files(result, end)
    staged = _stage(client, result, files, tmp_path, downloader_factory=lambda raw: Downloader(raw, policy=client.file_url_policy, options=DownloadOptions(transport=recording)))
    # A data file that several versions name (its DV changed each time) is downloaded once.
    fetched = Counter(p for p in recording.paths if p.endswith(".parquet"))
    assert set(fetched.values()) == {1} and len(fetched) < len({(c.file.id, c.commit_version) for c in files})
    before = read_source(spark, path, 0)
    names = sorted(before.column_names)
    for version in range(1, end + 1):
        after = read_source(spark, path, version)
        rows = staged.filter(pc.equal(staged["_commit_version"], version))
        by_kind = {k: rows.filter(pc.equal(rows["_change_type"], k)) for k in ("insert", "delete")}
        assert _rows(by_kind["delete"], names) == _rows(before, names) - _rows(after, names), version
        assert _rows(by_kind["insert"], names) == _rows(after, names) - _rows(before, names), version
        before = after


def test_a_dv_file_is_fetched_once_and_renewed_when_its_url_expires(
    served: tuple[SharingServer, SharingClient], tmp_path: Path
) -> None:
    server, client = served
    name = f"{SHARE}.{SCHEMA}.dv"
    result = client.changes(name, starting_version=0)
    files = batches.change_files(result, result.version + 99)
    listed = {f.deletion_vector_file_id for f in result.files if f.deletion_vector_file_id}
    assert len([f for f in result.files if f.deletion_vector is not None]) > len(listed) > 1  # DVs used twice
    server.clock.advance(2 * 3600)  # every URL handed out is expired now: data and DV URLs alike
    recording = Recording()
    downloader = Downloader(tmp_path / "raw", policy=client.file_url_policy, options=DownloadOptions(transport=recording))
    refresher = refresher_for(client, result)
    vectors, stats = load_deletion_vectors(files, downloader, refresher)
    assert stats is not None and stats.files == len(listed) and stats.url_refreshes >= 1
    fetched = [p for p in recording.paths if p.endswith(".bin")]
    assert len(set(fetched)) == len(listed) and all(n == 2 for n in Counter(fetched).values())  # 403, then renewed
    assert all(vectors.filter_for(c) is not None for c in files if c.file.deletion_vector is not None)


def test_a_corrupt_dv_fails_before_any_data_file_is_downloaded(provider: Path, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    shutil.copytree(provider / SHARE / SCHEMA / "dv", root / SHARE / SCHEMA / "dv")
    newest = max((root / SHARE / SCHEMA / "dv").rglob("deletion_vector_*.bin"), key=lambda p: p.stat().st_mtime)
    data = bytearray(newest.read_bytes())
    data[1 + 4 + 6] ^= 0x01
    newest.write_bytes(bytes(data))
    with SharingServer(root) as server:
        client = SharingClient(load_profile(server.write_profile(tmp_path / "p.share")))
        result = client.query(f"{SHARE}.{SCHEMA}.dv")
        recording = Recording()
        with pytest.raises(ProtocolViolation, match="fails its CRC-32 check"):
            _stage(client, result, batches.snapshot_change_files(result), tmp_path / "stage", snapshot=True,
                   downloader_factory=lambda raw: Downloader(raw, policy=client.file_url_policy, options=DownloadOptions(transport=recording)))  # fmt: skip
        client.close()
    assert recording.paths and all(p.endswith(".bin") for p in recording.paths)


def _copy_with(provider: Path, root: Path, name: str, edit: Callable[[Path, dict[str, Any]], None]) -> Path:
    table = shutil.copytree(provider / SHARE / SCHEMA / name, root / SHARE / SCHEMA / name)
    for log in (table / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        for action in actions:
            edit(table, action)
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    for crc in (table / "_delta_log").glob("*.crc"):
        crc.unlink()
    return table


def _inline(table: Path, action: dict[str, Any]) -> None:
    for inner in action.values():
        dv = inner.get("deletionVector") if isinstance(inner, dict) else None
        if dv and dv["storageType"] == "u":
            prefix, encoded = dv["pathOrInlineDv"][:-20], dv["pathOrInlineDv"][-20:]
            raw = (table / prefix / f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin").read_bytes()
            start = dv.pop("offset", 1) + 4
            dv.update(storageType="i", pathOrInlineDv=z85_encode(raw[start : start + dv["sizeInBytes"]]))


def _id_mode(table: Path, action: dict[str, Any]) -> None:
    """``id`` mode, with the data columns' physical names changed: only field ids can find them."""
    meta = action.get("metaData")
    if meta is None:
        return
    meta["configuration"]["delta.columnMapping.mode"] = "id"
    schema = json.loads(meta["schemaString"])
    for field in schema["fields"]:
        if field["name"] not in meta["partitionColumns"]:
            field["metadata"]["delta.columnMapping.physicalName"] = (
                f"moved-{field['metadata']['delta.columnMapping.id']}"
            )
    meta["schemaString"] = json.dumps(schema)


@pytest.mark.parametrize(("name", "edit"), [("dv", _inline), ("dvcm", _id_mode)], ids=["inline-dvs", "id-mode"])
def test_crafted_logs_stage_the_rows_sail_reads(
    provider: Path, spark: Any, tmp_path: Path, name: str, edit: Callable[[Path, dict[str, Any]], None]
) -> None:
    _copy_with(provider, tmp_path / "copy", name, edit)
    with SharingServer(tmp_path / "copy") as server:
        client = SharingClient(load_profile(server.write_profile(tmp_path / "p.share")))
        result = client.query(f"{SHARE}.{SCHEMA}.{name}")
        kinds = {f.deletion_vector.storage_type for f in result.files if f.deletion_vector is not None}
        assert kinds == ({"i"} if name == "dv" else {"p"})
        staged = _stage(client, result, batches.snapshot_change_files(result), tmp_path / "stage", snapshot=True)
        client.close()
    source = read_source(spark, provider / SHARE / SCHEMA / name, latest_version(provider / SHARE / SCHEMA / name))
    names = sorted(source.column_names)
    assert _rows(staged, names) == _rows(source, names)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_preview_shows_the_rows_sail_reads(
    served: tuple[SharingServer, SharingClient], spark: Any, provider: Path, name: str
) -> None:
    _, client = served
    shown = preview(client, f"{SHARE}.{SCHEMA}.{name}", limit=1000)
    source = read_source(spark, provider / SHARE / SCHEMA / name, shown.version)
    names = sorted(source.column_names)
    assert sorted(shown.table.column_names) == names
    assert _rows(shown.table, names) == _rows(source, names)


def test_pruning_reads_physical_partition_values_and_stats(served: tuple[SharingServer, SharingClient]) -> None:
    # Column mapping: partition values and stats are keyed by physical names (col-<uuid>).
    _, client = served
    result = client.query(f"{SHARE}.{SCHEMA}.dvcm")
    schema = result.metadata.table_schema
    files = batches.snapshot_change_files(result)
    assert all(k.startswith("col-") for c in files for k in c.file.partition_values)
    by_region, pruned = batches.prune(files, parse_where([{"col": "region", "op": "eq", "val": "eu"}], schema), schema)
    regions = {schema.column_mapping.partition_values(c.file.partition_values)["region"] for c in by_region}
    assert pruned > 0 and regions == {"eu"}
    none, pruned = batches.prune(files, parse_where([{"col": "id", "op": "gt", "val": 10_000}], schema), schema)
    assert none == [] and pruned == len(files)  # every file's max id (a physical stats key) is below


def test_a_dv_relative_to_the_providers_table_is_a_clear_error(tmp_path: Path) -> None:
    relative = DeletionVectorDescriptor("u", "ab" + "0" * 20, 34, 1, 1)
    changes = snapshot_files([File(url="https://x/f.parquet", id="f", size=1, deletion_vector=relative)], 1)
    with pytest.raises(ProtocolViolation, match="storage type 'u'.*presigned URL"):
        load_deletion_vectors(changes, Downloader(tmp_path, policy=FileUrlPolicy("https://x/")), None)


def test_a_filter_never_prunes_the_rows_a_dv_delete_marks() -> None:
    """A DV delete logs remove(f) + add(f, dv); the add's stats may cover only the rows it keeps.

    Crafted actions: Sail and Delta Spark keep the old, wide bounds (``tightBounds: false``), but
    the protocol lets a writer record tight ones — here the deleted row (amount 150) is outside them.
    """
    schema_string = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "long", "nullable": True, "metadata": {}},
    ]})  # fmt: skip
    schema = Metadata(id="t", schemaString=schema_string).table_schema
    tight = {"numRecords": 4, "minValues": {"id": 2, "amount": 50}, "maxValues": {"id": 4, "amount": 70},
             "nullCount": {"id": 0, "amount": 0}, "tightBounds": True}  # fmt: skip
    dv = DeletionVectorDescriptor("p", "https://storage/dv.bin?sig=s", 34, 1, 1)
    removed = RemoveFile(url="https://storage/f.parquet?r", id="f", size=10, version=1, timestamp=1)
    added = AddFile(url="https://storage/f.parquet?a", id="f", size=10, version=1, timestamp=1,
                    stats=json.dumps(tight), deletion_vector=dv, deletion_vector_file_id="dv")  # fmt: skip
    changes = select_change_files([removed, added])
    assert [(c.change_type, c.rows.within) for c in changes] == [(ChangeType.DELETE, added)]

    kept, pruned = batches.prune(changes, parse_where([{"col": "amount", "op": "gt", "val": 100}], schema), schema)
    assert (kept, pruned) == (changes, 0)
    # The add's own rows still prune on its stats: an insert of that file with the same filter.
    inserted = select_change_files([added.model_copy(update={"deletion_vector": None})])
    assert batches.prune(inserted, parse_where([{"col": "amount", "op": "gt", "val": 100}], schema), schema)[1] == 1
