"""Merge mode: apply a staged batch to a target Delta table with one MERGE of its net change per key.

Exactly once: each target row carries ``_sharesync_version``, the source commit of its last
change. A change applies only where it is newer than that guard, so re-running a batch after a
crash (MERGE committed, checkpoint not yet moved) changes nothing, per key.

Only calls that Sail and Apache Spark + Delta Lake both support are used: DataFrame reads and
writes, ``DataFrame.mergeInto`` on a registered table name, ``CREATE TABLE … LOCATION`` and
``DELETE FROM`` (tests/pipelines/test_spark_connect_surface.py records the plans the jobs send
and holds them to that). Every job checks the target and the schema before it writes anything.

Jobs take ``spark`` as a session or a zero-argument factory (``lambda: get_spark(config)``):
an empty batch returns before the factory is called, so it never starts an engine. The other
modes are jobs of their own: :mod:`sharesync.pipelines.modes.snapshot.snapshot` (bootstrap,
snapshot mode) and :mod:`sharesync.pipelines.modes.append.append`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from functools import reduce
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.column_add import add_empty_columns
from sharesync.pipelines.jobs.columns import (
    DELETED_COLUMN,
    GUARD_COLUMNS,
    TIMESTAMP_COLUMN,
    VERSION_COLUMN,
    col,
    guard_values,
    keeps,
    projection,
    quote_identifier,
)
from sharesync.pipelines.jobs.key_bounds import bounds_of, within_bounds
from sharesync.pipelines.jobs.session import session_of
from sharesync.pipelines.jobs.staged import read_staged, staged_files
from sharesync.pipelines.jobs.widening import widen_target
from sharesync.pipelines.modes.merge.rewrite import can_rewrite, rewrite_target
from sharesync.pipelines.targets.delta.fencing import fenced_dml
from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.facts import ApplyStats, Tally, Written
from sharesync.pipelines.targets.state import TargetState, require_columns
from sharesync.sync.core.changefeed import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, UPSERT_TYPES
from sharesync.sync.core.config import DEFAULT_REWRITE_THRESHOLD
from sharesync.sync.core.errors import SyncError
from sharesync.sync.core.location import Place, locate
from sharesync.sync.planning.key_ranges import KeyBound, decisive_bounds, misses_every_file
from sharesync.sync.staging.netted import read_netted

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.merge import MergeIntoWriter

__all__ = ["apply_merge"]

_UPSERT = "_sharesync_upsert"  # merge source only: TRUE = the winning image stays (never written)


def apply_merge(
    spark: SparkSession | Callable[[], SparkSession],
    staged: Place,
    target: Place,
    *,
    keys: Sequence[str],
    columns: Sequence[str] | None = None,
    row_filter: Column | None = None,
    soft_delete: bool = False,
    replay_from: int | None = None,
    rewrite_threshold: float | None = DEFAULT_REWRITE_THRESHOLD,
    record: str | None = None,
    deletion_vectors: bool = True,
) -> Written[ApplyStats]:
    """MERGE the batch's net changes into ``target`` on ``keys``; idempotent per key.

    A key whose winning image is a delete, a preimage, or fails ``row_filter`` (only TRUE keeps
    a row: SQL three-valued logic) is deleted — or, with ``soft_delete``, flagged
    ``_sharesync_deleted``. ``columns`` projects the data columns (keys always kept). A missing
    target is created from the batch: the first batch may be a bootstrap snapshot.

    ``replay_from`` (backfill): target rows whose guard version is at or after it are
    overwritten by this batch even when not older — the replay re-applies history the target
    already claims to have. Re-running such a batch rewrites the same values again.

    ``staged`` is a finished batch, netted per key in Arrow (:mod:`sharesync.sync.staging.netting`):
    the stager nets a merge batch as it downloads it, and the run nets a batch staged otherwise
    before this job starts — a Spark window over the key cost two thirds of an incremental sync on Sail. Keys
    match with plain ``=`` when no key in the batch is NULL (cheaper than NULL-safe ``<=>``; a
    NULL-keyed target row cannot be matched by such a batch anyway).

    ``rewrite_threshold``: when the net changes number at least this share of the target's rows,
    the target is rewritten instead (:mod:`sharesync.pipelines.modes.merge.rewrite`: same result and
    guards, one ``overwrite`` commit, several times cheaper when most files would be rewritten
    anyway); ``None`` always MERGEs.

    ``deletion_vectors``: whether a target this creates is merge-on-read.

    A batch whose keys no target file can hold — its statistics say every file lies outside the
    batch's key range, as with rows added under growing keys — is appended instead of MERGEd:
    the same rows, one commit that reads nothing of the target (``key_ranges.misses_every_file``).

    ``record``: the batch's commit record, written with a created or rewritten target; a MERGE
    cannot carry it on Sail, so the rows' guard versions stand for it (``db recover``).

    Returns what it committed; the target format counts it (``DELTA.applied``).
    """
    target = locate(target)
    if not keys or isinstance(keys, str):
        raise SyncError(f"target '{target}': merge mode needs a list of key columns, got {keys!r}")
    files = staged_files(staged)
    if not files:
        return Written(ApplyStats())
    state = WRITER.state(target)
    session = session_of(spark)
    data_columns = projection(read_staged(session, staged, files), keys, columns)
    by_lower = {c.lower(): c for c in data_columns}
    netted = read_netted(staged, [by_lower[k.lower()] for k in keys])
    null_keys, rows = netted.null_keys, netted.rows_before
    df = read_staged(session, staged)
    net = _merge_source(df, data_columns, row_filter)
    if not state.exists:
        from pyspark.sql import functions as F

        out = net.where(F.col(_UPSERT)).select(*[col(c) for c in data_columns], *guard_values(soft_delete))
        return WRITER.create(out, target, rows=rows, record=record, deletion_vectors=deletion_vectors)
    require_columns(state, [VERSION_COLUMN, TIMESTAMP_COLUMN], "merge")
    add_deleted = soft_delete and DELETED_COLUMN not in state.column_names
    state, _ = widen_target(session, df, state, data_columns, exclude=GUARD_COLUMNS)
    added = _evolve(df, state, data_columns, add_deleted=add_deleted)
    if added or add_deleted:
        state = dataclasses.replace(WRITER.state(target), version=state.version)  # metrics count from before
    bounds = bounds_of(netted.key_spans, state)
    if not (soft_delete or replay_from is not None or null_keys) and _only_new_keys(state, data_columns, bounds):
        from pyspark.sql import functions as F

        inserted = net.where(F.col(_UPSERT)).select(*[col(c) for c in data_columns], *guard_values(soft_delete))
        WRITER.save(inserted, target, mode="append", record=record)
        return Written(ApplyStats(rows, added_columns=added), target, state.version, Tally.WRITTEN)
    if _rewrites(state, data_columns, soft_delete, netted.rows_after, rewrite_threshold):
        counts = rewrite_target(
            session,
            net,
            target,
            keys=keys,
            data_columns=data_columns,
            upsert_flag=_UPSERT,
            soft_delete=soft_delete,
            replay_from=replay_from,
            null_keys=null_keys,
            record=record,
        )
        known = ApplyStats(rows, counts.inserted, counts.updated, counts.deleted, added_columns=added)
        return Written(known, target, state.version)
    name = WRITER.register(session, target)
    within = within_bounds(name, bounds)  # the files the batch can touch
    soft_deleted = _soft_deletes(session, net, name, keys, replay_from, null_keys) if soft_delete else 0
    flagged = DELETED_COLUMN in state.column_names  # soft deletes on, or on once (a live row is unflagged)
    with fenced_dml(session):
        _merge_writer(net, name, keys, data_columns, soft_delete, replay_from, null_keys, flagged, within).merge()
    known = ApplyStats(rows, added_columns=added)
    return Written(known, target, state.version, Tally.MERGED, soft_deleted=soft_deleted)


def _only_new_keys(state: TargetState, data_columns: Sequence[str], bounds: Sequence[KeyBound]) -> bool:
    """Whether the target's file statistics say no file can hold a key of the batch — keys above
    all it holds, say — and the batch's rows are the target's columns: then the MERGE would only
    insert, and an append writes the same rows without reading the target."""
    written = {c.lower() for c in [*data_columns, VERSION_COLUMN, TIMESTAMP_COLUMN]}
    if {c.lower() for c in state.column_names} != written:
        return False  # e.g. a soft-delete flag from before, or columns the batch leaves out
    decisive = decisive_bounds(bounds)
    if not decisive:
        return False  # no statistic could prove a key absent: the log is not read
    return misses_every_file(decisive, WRITER.key_ranges(state.location, [b.column for b in decisive]))


def _rewrites(
    state: TargetState, data_columns: Sequence[str], soft_delete: bool, net_rows: int, threshold: float | None
) -> bool:
    if threshold is None or not can_rewrite(state, data_columns, soft_delete=soft_delete):
        return False
    return net_rows >= threshold * WRITER.rows(state.location)


def _merge_source(net: DataFrame, data_columns: Sequence[str], row_filter: Column | None) -> DataFrame:
    """Net changes, projected, with the upsert flag computed on the full (unprojected) row."""
    from pyspark.sql import functions as F

    upsert = F.col(CHANGE_TYPE).isin(*UPSERT_TYPES) & keeps(row_filter)
    return net.select(*[col(c) for c in data_columns], COMMIT_VERSION, COMMIT_TIMESTAMP, upsert.alias(_UPSERT))


def _evolve(df: DataFrame, state: TargetState, data_columns: Sequence[str], *, add_deleted: bool) -> tuple[str, ...]:
    """Add the batch's new columns (and the soft-delete flag) before the MERGE (:func:`add_empty_columns`)."""
    from pyspark.sql import functions as F

    added = WRITER.added_columns(df, state, data_columns, exclude=GUARD_COLUMNS)
    if not added and not add_deleted:
        return added
    new = [col(c) for c in added] + ([F.lit(None).cast("boolean").alias(DELETED_COLUMN)] if add_deleted else [])
    add_empty_columns(df, state, new, sorted({*added, *([DELETED_COLUMN] if add_deleted else [])}))
    return added


def _applies(source: str, target: str, replay_from: int | None) -> Column:
    """The guard: the change is newer than the row's last change (or the row is being replayed)."""
    from pyspark.sql import functions as F

    guard = F.col(f"{target}.{quote_identifier(VERSION_COLUMN)}")
    newer = F.col(f"{source}.{quote_identifier(COMMIT_VERSION)}") > guard
    return newer if replay_from is None else newer | (guard >= F.lit(int(replay_from)))


def _key_match(keys: Sequence[str], target_alias: str, source_alias: str, null_safe: bool = True) -> Column:
    """Key equality; NULL-safe when the batch has NULL keys (a NULL key must match itself, or
    every re-run re-inserts it), plain ``=`` otherwise (measured ≈ 25 % faster on Sail)."""
    from pyspark.sql import functions as F

    def equal(k: str) -> Column:
        left, right = F.col(f"{target_alias}.{quote_identifier(k)}"), F.col(f"{source_alias}.{quote_identifier(k)}")
        return left.eqNullSafe(right) if null_safe else left == right

    pairs = [equal(k) for k in keys]
    return reduce(lambda a, b: a & b, pairs)


def _merge_writer(
    net: DataFrame,
    name: str,
    keys: Sequence[str],
    data_columns: Sequence[str],
    soft_delete: bool,
    replay_from: int | None,
    null_keys: bool = True,
    flagged: bool = False,
    within: Column | None = None,
) -> MergeIntoWriter:
    """Guarded (soft) delete, guarded update, insert of new keys — the three MERGE clauses.

    ``flagged``: the target has the soft-delete column; every row written live says so, even
    once soft deletes are switched off (a key deleted and inserted again is not deleted).
    ``within``: the batch's key bounds on the target (:func:`within_bounds`), ANDed to the key
    match so the engine reads only the files that can hold a batch key.
    """
    from pyspark.sql import functions as F

    def s(c: str) -> Column:
        return F.col(f"s.{quote_identifier(c)}")

    def t(c: str) -> Column:
        return F.col(f"{name}.{quote_identifier(c)}")

    newer, upsert = _applies("s", name, replay_from), s(_UPSERT)
    guards = {
        quote_identifier(VERSION_COLUMN): s(COMMIT_VERSION),
        quote_identifier(TIMESTAMP_COLUMN): s(COMMIT_TIMESTAMP),
    }
    if soft_delete or flagged:
        guards[quote_identifier(DELETED_COLUMN)] = ~upsert
    values = {quote_identifier(c): s(c) for c in data_columns}
    on = _key_match(keys, name, "s", null_keys)
    writer = net.alias("s").mergeInto(name, on if within is None else on & within)
    if soft_delete:
        live = ~F.coalesce(t(DELETED_COLUMN), F.lit(False))  # re-flagging a deleted row is no change
        writer = writer.whenMatched(newer & ~upsert & live).update(guards)
    else:
        writer = writer.whenMatched(newer & ~upsert).delete()
    writer = writer.whenMatched(newer & upsert).update({**values, **guards})
    return writer.whenNotMatched(upsert).insert({**values, **guards})


def _soft_deletes(
    spark: SparkSession, net: DataFrame, name: str, keys: Sequence[str], replay_from: int | None, null_keys: bool
) -> int:
    """Rows the soft-delete clause is about to flag, counted just before the MERGE.

    The commit metrics count a soft delete as an update, so this one number is computed, with
    the clause's own condition over the delete-ish net changes joined to the target (≈ 0.4 s for
    a 1M-row target here, against ≈ 2.5 s for the MERGE). A lease keeps writers out meanwhile.
    """
    from pyspark.sql import functions as F

    source = net.where(~F.col(_UPSERT)).alias("s")
    target = spark.table(name).alias("t")
    newer = _applies("s", "t", replay_from)
    live = ~F.coalesce(F.col(f"t.{DELETED_COLUMN}"), F.lit(False))
    return int(source.join(target, _key_match(keys, "t", "s", null_keys)).where(newer & live).count())
