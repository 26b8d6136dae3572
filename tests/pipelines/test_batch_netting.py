"""A merge batch netted in memory as it downloads equals the same batch staged file by file and
netted afterwards — over real downloads from the local sharing server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.faults import SharingServer
from support.jobs import net_as_staged

from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.profile import load_profile
from sharesync.sync.staging import batch as batches
from sharesync.sync.staging.files import StageLayout
from sharesync.sync.staging.netted import read_netted

TABLE = "samples.all_types.partitioned"  # 8 random commits of inserts, updates and deletes


@pytest.fixture
def client(sharing_server: SharingServer) -> Iterator[SharingClient]:
    assert sharing_server.profile_path is not None
    with SharingClient(load_profile(sharing_server.profile_path)) as client:
        yield client


def stage_changes(client: SharingClient, directory: Path, net_keys: list[str] | None) -> batches.StagedBatch:
    version = client.table_version(TABLE).version
    result = client.changes(TABLE, starting_version=1, ending_version=version, include_historical_metadata=True)
    metadata = batches.batch_schema(result, version)
    layout = StageLayout.build(metadata.table_schema, metadata.partition_columns)
    files = batches.change_files(result, version)
    return batches.stage(client, result, files, layout, directory, concurrency=4, net_keys=net_keys)


def rows_of(directory: Path) -> list[dict[str, object]]:
    table = pa.concat_tables([pq.read_table(f) for f in sorted(directory.glob("*.parquet"))])
    return sorted(table.to_pylist(), key=lambda r: r["id"])  # type: ignore[arg-type, return-value]


def test_netting_while_downloading_equals_netting_the_staged_files(client: SharingClient, tmp_path: Path) -> None:
    in_memory = stage_changes(client, tmp_path / "memory", ["id"])
    on_disk = stage_changes(client, tmp_path / "disk", None)
    memory_dir, disk_dir = Path(in_memory.path.path), Path(on_disk.path.path)
    assert len(list(disk_dir.glob("*.parquet"))) > 1  # several versions' files, several events per key
    netted = net_as_staged(on_disk.path, ["id"])

    assert [p.name for p in memory_dir.glob("*.parquet")] == ["netted.parquet"]
    assert in_memory.rows == on_disk.rows == netted.rows_before  # rows_in_batch counts change rows, not keys
    assert netted.rows_after < netted.rows_before
    assert rows_of(memory_dir) == rows_of(disk_dir)
    assert read_netted(in_memory.path, ["id"]) == netted  # what the stager recorded: the same batch
