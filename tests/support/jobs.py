"""Build staged batches with pyarrow and read targets back with deltalake (no engine involved)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable

from sharesync.pipelines.targets.delta.rows import read_rows

StageFn = Callable[..., Path]  # the ``stage`` fixture: stage(rows, schema=SCHEMA, files=1) -> directory

T0 = datetime(2024, 1, 1, tzinfo=UTC)
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.int32())])
CHANGE_FIELDS = [
    ("_change_type", pa.string()),
    ("_commit_version", pa.int64()),
    ("_commit_timestamp", pa.timestamp("us", tz="UTC")),
]


def commit_time(version: int) -> datetime:
    return T0 + timedelta(hours=version)


def ins(version: int, **row: Any) -> dict[str, Any]:
    return {**row, "_change_type": "insert", "_commit_version": version}


def delete(version: int, **row: Any) -> dict[str, Any]:
    return {**row, "_change_type": "delete", "_commit_version": version}


def pre(version: int, **row: Any) -> dict[str, Any]:
    return {**row, "_change_type": "update_preimage", "_commit_version": version}


def post(version: int, **row: Any) -> dict[str, Any]:
    return {**row, "_change_type": "update_postimage", "_commit_version": version}


def write_batch(directory: Path, rows: Sequence[dict[str, Any]], schema: pa.Schema = SCHEMA, files: int = 1) -> Path:
    """Stage ``rows`` (data columns + _change_type + _commit_version) as ``files`` parquet files."""
    directory.mkdir(parents=True, exist_ok=True)
    full = pa.schema([*schema, *CHANGE_FIELDS])
    rows = [{**r, "_commit_timestamp": commit_time(r["_commit_version"])} for r in rows]
    chunk = max(1, -(-len(rows) // files)) if rows else 0
    for i in range(files if rows else 0):
        part = rows[i * chunk : (i + 1) * chunk]
        if part:
            pq.write_table(pa.Table.from_pylist(part, schema=full), directory / f"part-{i:03d}.parquet")
    return directory


def read_target(path: str | Path, *, key: str = "id", drop: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The target's rows sorted by ``key`` (NULL first), without the ``drop`` columns."""
    rows = read_rows(DeltaTable(str(path))).to_pylist()
    dropped = set(drop)
    rows = [{k: v for k, v in r.items() if k not in dropped} for r in rows]
    return sorted(rows, key=lambda r: (r[key] is not None, r[key]))


def data_rows(path: str | Path, *, key: str = "id") -> list[dict[str, Any]]:
    """Target rows without sharesync's guard columns."""
    guards = ("_sharesync_version", "_sharesync_commit_timestamp", "_sharesync_deleted")
    return read_target(path, key=key, drop=guards)


def version_of(path: str | Path) -> int:
    return DeltaTable(str(path)).version()


def write_direct_batch(
    directory: Path, rows: Sequence[dict[str, Any]], partition: dict[str, str | None], version: int
) -> Path:
    """A snapshot batch whose one provider file is kept as downloaded (sharesync.sync.staging.direct):
    ``rows`` hold SCHEMA's columns except ``partition``'s, whose values the file's action carries."""
    from sharesync.sync.core.location import locate
    from sharesync.sync.protocol.changes import snapshot_files
    from sharesync.sync.protocol.wire import File, StructType
    from sharesync.sync.staging.direct import DirectFiles
    from sharesync.sync.staging.files import StageLayout

    types = {pa.int64(): "long", pa.string(): "string", pa.int32(): "integer"}
    fields = [{"name": f.name, "type": types[f.type], "nullable": True, "metadata": {}} for f in SCHEMA]
    layout = StageLayout.build(StructType.model_validate({"type": "struct", "fields": fields}), list(partition))
    directory.mkdir(parents=True, exist_ok=True)
    downloaded = directory.parent / f"{directory.name}-download.parquet"
    in_file = pa.schema([f for f in SCHEMA if f.name not in partition])
    pq.write_table(pa.Table.from_pylist(list(rows), schema=in_file), downloaded)
    action = File(url="https://provider.invalid/f", id="f1", partition_values=partition, size=1)
    [change] = snapshot_files([action], version)
    kept = DirectFiles(locate(directory), layout)
    assert kept.take(downloaded, "part-000.parquet", change) == len(rows)
    kept.finish()
    return directory


def net_as_staged(directory: Any, keys: Sequence[str]) -> Any:
    """A batch written file by file (``write_batch``) as the stager leaves a merge batch: one netted
    file, by the stager's own ``write_netted`` (it nets in memory as files arrive). A batch netted
    already is left alone. Returns what the netted batch says of itself."""
    from sharesync.sync.core.location import locate
    from sharesync.sync.staging.netted import find_netted, spelled_keys
    from sharesync.sync.staging.netting import write_netted

    files, done = find_netted(directory, keys)
    if done is not None:
        return done
    table = pa.concat_tables([pq.read_table(f.path, filesystem=f.filesystem) for f in files], promote_options="none")
    for f in files:
        f.delete()
    return write_netted(table, spelled_keys(table.column_names, keys), locate(directory))


def apply_merge(spark: Any, staged: Any, target: Any, **kwargs: Any) -> Any:
    """What the run does for a merge batch (pipelines/modes/merge/merge_mode.py): staging nets the batch
    (here: :func:`net_as_staged`), then the merge job applies it and the target format counts what it
    committed. A batch without keys goes straight to the job, which refuses it."""
    from sharesync.pipelines.modes.merge.merge import apply_merge as merge_job

    keys = kwargs.get("keys")
    if keys and not isinstance(keys, str):
        net_as_staged(staged, keys)
    return _counted(merge_job(spark, staged, target, **kwargs))


def apply_append(spark: Any, staged: Any, target: Any, **kwargs: Any) -> Any:
    """The append job, its commits counted by the target format as the strategy counts them."""
    from sharesync.pipelines.modes.append.append import apply_append as append_job

    return _counted(append_job(spark, staged, target, **kwargs))


def apply_snapshot(spark: Any, staged: Any, target: Any, **kwargs: Any) -> Any:
    from sharesync.pipelines.modes.snapshot.snapshot import apply_snapshot as snapshot_job

    return _counted(snapshot_job(spark, staged, target, **kwargs))


def replace_target(spark: Any, staged: Any, target: Any, **kwargs: Any) -> Any:
    from sharesync.pipelines.modes.snapshot.snapshot import replace_target as replace_job

    return _counted(replace_job(spark, staged, target, **kwargs))


def _counted(written: Any) -> Any:
    from sharesync.pipelines.targets.delta.format import DELTA

    return DELTA.applied(written)
