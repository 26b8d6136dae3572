"""The Spark Connect surface the jobs use: one list, the same on both engines.

This records every Spark Connect request the jobs send while they run — on Sail and on Apache
Spark 4.2 + Delta Lake 4.4 (the test runs on both) — and checks that each one is in the surface
both engines accept:

* SQL text has one of three standard shapes (CREATE TABLE … USING delta LOCATION, DELETE FROM
  with an optional integer bound) — no ALTER TABLE, DESCRIBE HISTORY or ``delta.`path``` names;
* writes are Delta writes by path with standard save modes and only the ``mergeSchema`` /
  ``overwriteSchema`` options and two table properties on creation (no ``replaceWhere``);
* reads are parquet files, registered tables or Delta tables by path;
* every MERGE targets a name an earlier CREATE TABLE registered (Sail needs it; Spark accepts it);
* every function in every expression is a Spark SQL builtin or a Connect operator alias.

It fails if a job starts sending something outside that surface.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from support.jobs import (
    StageFn,
    apply_append,
    apply_merge,
    apply_snapshot,
    delete,
    ins,
    post,
    pre,
    replace_target,
    write_direct_batch,
)

from sharesync.pipelines.modes.history.history_batch import apply_history, bootstrap_history

if TYPE_CHECKING:
    from google.protobuf.message import Message  # type: ignore[import-untyped]
    from pyspark.sql import SparkSession

NAME = r"sharesync_[0-9a-f]{20}"
SQL_SHAPES = [
    re.compile(rf"CREATE TABLE IF NOT EXISTS {NAME} USING delta LOCATION '(?:[^'\\]|\\.)*'"),
    re.compile(rf"DELETE FROM {NAME}"),
    re.compile(rf"DELETE FROM {NAME} WHERE `_commit_version` > -?\d+"),
]
# Spark SQL builtins (FunctionRegistry) plus the operator names the Connect planner maps.
FUNCTIONS = {"==", "<=>", ">", ">=", "and", "or", "not", "in", "coalesce", "when", "count", "isNotNull", "<=", "isNull"}
# delta.enableDeletionVectors, delta.dataSkippingNumIndexedCols: table properties set on creation
# (Delta Lake reads "delta."-prefixed writer options as table properties; Sail stores them in the
# metaData configuration).
WRITE_OPTIONS = {"mergeSchema", "overwriteSchema", "delta.enableDeletionVectors", "delta.dataSkippingNumIndexedCols"}
# UNSPECIFIED is Spark's default mode, error-if-exists: what creating a target relies on.
SAVE_MODES = {"SAVE_MODE_APPEND", "SAVE_MODE_OVERWRITE", "SAVE_MODE_ERROR_IF_EXISTS", "SAVE_MODE_UNSPECIFIED"}


def _walk(message: Message) -> Iterator[Message]:
    yield message
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            children = [v for v in value.values() if hasattr(v, "ListFields")]
        elif field.is_repeated:
            children = list(value)
        else:
            children = [value]
        for child in children:
            yield from _walk(child)


@pytest.fixture
def sent(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    """Every plan the session sends (executions and schema analyses) while the test runs."""
    client: Any = spark.client
    plans: list[Message] = []
    execute, analyze = client._execute_and_fetch_as_iterator, client._analyze

    def recording_execute(req: Any, *args: Any, **kwargs: Any) -> Any:
        plans.append(req.plan)
        return execute(req, *args, **kwargs)

    def recording_analyze(method: str, **kwargs: Any) -> Any:
        if "plan" in kwargs:
            plans.append(kwargs["plan"])
        return analyze(method, **kwargs)

    monkeypatch.setattr(client, "_execute_and_fetch_as_iterator", recording_execute)
    monkeypatch.setattr(client, "_analyze", recording_analyze)
    return plans


def test_every_request_is_in_the_shared_spark_connect_delta_surface(
    spark: SparkSession, stage: StageFn, tmp_path: Any, sent: list[Message]
) -> None:
    import pyarrow as pa
    from pyspark.sql import functions as F
    from support.jobs import SCHEMA

    merge_t, rewrite_t, append_t, snap_t = (str(tmp_path / n / "it's") for n in ("m", "r", "a", "s"))
    wider = pa.schema([*SCHEMA, ("extra", pa.string())])
    rows = [ins(1, id=i, name="a", score=i) for i in range(3)]
    changes = [
        pre(2, id=0, name="a", score=0),
        post(2, id=0, name="b", score=0, extra="x"),
        delete(2, id=1, name="a", score=1),
        ins(2, id=None, name="n", score=2, extra=None),  # a NULL key: the MERGE matches NULL-safe
    ]
    keep = F.col("score") >= 0
    for target, threshold in ((merge_t, None), (rewrite_t, 0.0)):  # the MERGE statement, then the rewrite
        apply_merge(spark, stage(rows), target, keys=["id"], row_filter=keep)
        apply_merge(
            spark,
            stage(changes, wider),
            target,
            keys=["id"],
            row_filter=keep,
            soft_delete=True,
            replay_from=1,
            rewrite_threshold=threshold,
        )
    apply_append(spark, stage(rows), append_t, after_version=0)
    apply_append(spark, stage(changes, wider), append_t, after_version=1)
    apply_snapshot(spark, stage(rows), snap_t)
    apply_snapshot(spark, stage(rows, wider), snap_t)
    apply_snapshot(spark, stage([]), snap_t)
    replace_target(spark, stage(rows), merge_t, keys=["id"])
    # A bootstrap read as the provider wrote its files: each group joined with its constant row.
    direct = write_direct_batch(tmp_path / "direct", [{"id": 7, "score": 1}], {"name": "p"}, version=4)
    replace_target(spark, direct, merge_t, keys=["id"])
    apply_snapshot(spark, direct, str(tmp_path / "ds" / "it's"))
    for target, threshold in ((str(tmp_path / "h" / "it's"), None), (str(tmp_path / "hr" / "it's"), 0.0)):
        bootstrap_history(spark, stage(rows), target, keys=["id"], version=1)  # creates the target
        apply_history(
            spark,
            stage(changes, wider),
            target,
            keys=["id"],
            track_history=["name"],
            replay_from=1,
            rewrite_threshold=threshold,
        )
        again = stage([ins(3, id=0, name="c", score=0, extra="y")], wider)
        bootstrap_history(spark, again, target, keys=["id"], version=3, rewrite_threshold=threshold)
    bootstrap_history(spark, stage(rows), merge_t, keys=["id"], version=1, replace=True)

    messages = [m for plan in sent for m in _walk(plan)]
    by_type: dict[str, list[Any]] = {}
    for m in messages:
        by_type.setdefault(m.DESCRIPTOR.full_name, []).append(m)

    statements = [c.sql for c in by_type.get("spark.connect.SqlCommand", []) if c.sql]
    statements += [q.query for q in by_type.get("spark.connect.SQL", [])]
    assert statements, "the jobs should register targets with SQL"
    for statement in statements:
        assert any(shape.fullmatch(statement) for shape in SQL_SHAPES), statement

    writes = by_type["spark.connect.WriteOperation"]
    for write in writes:
        assert write.source == "delta" and write.path and not write.table.table_name
        assert write.DESCRIPTOR.fields_by_name["mode"].enum_type.values_by_number[write.mode].name in SAVE_MODES
        assert set(write.options) <= WRITE_OPTIONS, dict(write.options)
        assert not write.with_schema_evolution and not write.partitioning_columns

    sources = by_type.get("spark.connect.Read.DataSource", [])
    for source in sources:
        assert source.format in ("parquet", "delta") and source.paths and not source.options
    assert any(source.format == "delta" for source in sources)  # the recording saw the rewrite
    registered = {m.group(0) for s in statements if (m := re.search(NAME, s)) and s.startswith("CREATE")}
    for table in by_type.get("spark.connect.Read.NamedTable", []):
        assert table.unparsed_identifier in registered

    # The recording saw the direct read: a join whose left side is a group's one-row file.
    lefts = [m for j in by_type["spark.connect.Join"] for m in _walk(j.left)]
    assert any(
        "/_direct/" in p for m in lefts if m.DESCRIPTOR.full_name == "spark.connect.Read.DataSource" for p in m.paths
    )

    merges = by_type["spark.connect.MergeIntoTableCommand"]
    # The creating batches are writes; in merge and history mode one target merges, one rewrites.
    assert len(merges) == 3
    assert all(m.target_table_name in registered for m in merges)

    functions = {f.function_name for f in by_type.get("spark.connect.Expression.UnresolvedFunction", [])}
    assert {"<=>", "coalesce"} <= functions  # the recording saw the NULL-safe MERGE
    assert functions <= FUNCTIONS, functions - FUNCTIONS

    everything = " ".join(statements + [w.path for w in writes])
    for forbidden in ("ALTER", "DESCRIBE", "delta.`", "replaceWhere", "enableChangeDataFeed"):
        assert forbidden not in everything
