"""Look at the first N matching rows of a live shared table without syncing it.

Hints (``limitHint``, ``predicateHints``, ``jsonPredicateHints``) are only best effort on the
server, so both the filter and the limit are applied again here, and files are downloaded
one small group at a time — only as many as it takes to fill N rows. Files whose
partition values or stats prove no row can match are never downloaded.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from sharesync.sync.core.changefeed import CHANGE_COLUMNS
from sharesync.sync.predicates import (
    Expr,
    Predicate,
    may_match,
    parse_where,
    to_arrow,
    to_json_hints,
    to_sql_hints,
)
from sharesync.sync.protocol.changes import snapshot_files
from sharesync.sync.protocol.client import SharingClient
from sharesync.sync.protocol.refresh import refresher_for
from sharesync.sync.protocol.wire import File
from sharesync.sync.staging.batch import client_downloader
from sharesync.sync.staging.deletions import load_deletion_vectors
from sharesync.sync.staging.files import StageLayout, stage_file

GROUP = 4  # files fetched in parallel per round: enough to hide latency, few enough to stop early


@dataclass(frozen=True)
class Preview:
    table: pa.Table
    version: int
    files_listed: int
    files_pruned: int
    files_downloaded: int


def preview(
    client: SharingClient,
    name: str,
    *,
    limit: int = 20,
    where: list[Predicate] | None = None,
    version: int | None = None,
    ca_bundle: Path | None = None,
) -> Preview:
    metadata = client.metadata(name, version=version)
    schema = metadata.metadata.table_schema
    expr: Expr | None = parse_where(where, schema, table=name) if where else None
    partitions = metadata.partition_columns
    result = client.query(
        name,
        version=version,
        # A server applies limitHint to rows *before* any filter (it picks files until their
        # numRecords reach it), so with a filter it would cut the listing short of matching rows.
        limit_hint=limit if expr is None else None,
        predicate_hints=(to_sql_hints(expr) or None) if expr else None,
        json_predicate_hints=to_json_hints(expr, partitions) if expr else None,
    )
    files = [f for f in result.files if isinstance(f, File)]
    candidates = [f for f in files if expr is None or may_match(expr, f.parsed_stats, f.partition_values, schema)]
    layout = StageLayout.build(schema, partitions)
    data_schema = pa.schema([f for f in layout.target if f.name not in CHANGE_COLUMNS])
    collected: list[pa.Table] = []
    rows = downloaded = 0
    filter_expr = to_arrow(expr) if expr is not None else None
    with tempfile.TemporaryDirectory(prefix="sharesync-preview-") as tmp:
        downloader = client_downloader(client, Path(tmp), concurrency=GROUP, ca_bundle=ca_bundle)
        refresher = refresher_for(client, result)
        for start in range(0, len(candidates), GROUP):
            if rows >= limit:
                break
            group = candidates[start : start + GROUP]
            changes = snapshot_files(group, result.version)
            deletion_vectors, _ = load_deletion_vectors(changes, downloader, refresher)
            fetched = downloader.download(group, refresher=refresher)
            downloaded += len(group)
            for done, change in zip(fetched.files, changes, strict=True):
                staged = done.path.with_suffix(".staged.parquet")
                stage_file(done.path, staged, change, layout, deletion_vectors.filter_for(change))
                table = pq.read_table(staged).select(data_schema.names)
                if filter_expr is not None:
                    table = table.filter(filter_expr)
                collected.append(table)
                rows += table.num_rows
    combined = pa.concat_tables(collected) if collected else data_schema.empty_table()
    return Preview(combined.slice(0, limit), result.version, len(files), len(files) - len(candidates), downloaded)
