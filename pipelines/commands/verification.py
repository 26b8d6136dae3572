"""Does a target hold what its checkpoint claims? ``sharesync verify`` and the Dagster check ask here.

Two depths, neither changing anything:

* the identity check (:mod:`~sharesync.sync.planning.target_judgement`): the target is the Delta
  table the checkpoint was written for, at the recorded state or newer by commits that kept it;
* ``full``: the target's rows against the provider's snapshot at the checkpoint version — the key
  set and row count in merge mode (history mode: of its current rows), the row count in snapshot
  mode. The snapshot's files are
  downloaded (presigned URLs serve whole files) and only its key and filter columns are kept, as
  the sync stages them; the target is read with ``deltalake``. An append target is a change log,
  not a copy of a snapshot, so only its identity is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.pipelines.jobs.columns import DELETED_COLUMN, spelled
from sharesync.pipelines.run.table_context import TableContext, table_context
from sharesync.pipelines.run.target_check import switch_refusal
from sharesync.pipelines.targets.delta.format import DELTA
from sharesync.state import Checkpoint
from sharesync.sync.core.config import Mode, TableConfig
from sharesync.sync.core.errors import TargetError
from sharesync.sync.planning.run_plan import Finding
from sharesync.sync.planning.target_judgement import judge, switches_layout, written_for

if TYPE_CHECKING:
    import pyarrow as pa

    from sharesync.pipelines.run.pass_resources import TableAccess
    from sharesync.sync.protocol.client import QueryResult

EXAMPLES = 5  # keys shown per kind of difference

Key = tuple[object, ...]


@dataclass(frozen=True)
class SnapshotComparison:
    """The target against the provider's snapshot at ``version``."""

    version: int
    source_rows: int
    target_rows: int
    missing_keys: int = 0  # keys of the snapshot the target lacks (merge mode)
    extra_keys: int = 0  # keys in the target the snapshot lacks (merge mode)
    examples: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return self.source_rows == self.target_rows and not self.missing_keys and not self.extra_keys

    def describe(self) -> str:
        rows = f"{self.target_rows} rows in the target, {self.source_rows} in the provider's snapshot at version {self.version}"
        if self.matches:
            return f"the target matches the provider's snapshot at version {self.version} ({rows})"
        keys = (
            f"; {self.missing_keys} keys missing, {self.extra_keys} keys extra"
            if self.missing_keys or self.extra_keys
            else ""
        )
        shown = f" (e.g. {', '.join(self.examples)})" if self.examples else ""
        return f"the target differs from the provider's snapshot: {rows}{keys}{shown}"


@dataclass(frozen=True)
class Verification:
    """What ``sharesync verify`` found for one table."""

    name: str
    target: str
    mode: Mode
    checkpoint_version: int | None
    intact: bool  # the identity check passed
    identity: str  # what it found, in one sentence
    comparison: SnapshotComparison | None = None  # with ``full``, when the target could be compared
    note: str | None = None  # why ``full`` compared nothing

    @property
    def ok(self) -> bool:
        return self.intact and (self.comparison is None or self.comparison.matches)

    def lines(self) -> list[str]:
        said = [self.identity]
        if self.comparison is not None:
            said.append(self.comparison.describe())
        if self.note:
            said.append(self.note)
        return said


def verify_table(access: TableAccess, table: TableConfig, *, full: bool = False) -> Verification:
    """Check ``table``'s target against its checkpoint (and, ``full``, against the provider's snapshot)."""
    checkpoint = access.store.get_checkpoint(table.key)

    def found(
        intact: bool, identity: str, comparison: SnapshotComparison | None = None, note: str | None = None
    ) -> Verification:
        version = checkpoint.version if checkpoint else None
        return Verification(table.key, table.target, table.mode, version, intact, identity, comparison, note)

    if checkpoint is None:
        return found(False, f"{table.key} has no checkpoint: nothing synced to verify yet (run 'sharesync sync')")
    if not written_for(checkpoint, table):
        then = (
            str(switch_refusal(checkpoint, table))
            if switches_layout(checkpoint, table)
            else "the next sync bootstraps it"
        )
        return found(
            False,
            f"the checkpoint was written for target {checkpoint.target} in mode {checkpoint.mode}; the config names "
            f"{table.target} in mode {table.mode.value} ({then})",
        )
    current = DELTA.identity(access.locate(table.target), since=checkpoint.target_version)
    check = judge(checkpoint, current)
    if current is None:
        return found(False, f"target {table.target} is gone (no Delta table there); the next sync rebuilds it")
    if check.finding not in (Finding.INTACT, Finding.UNRECORDED):
        return found(False, check.describe())
    identity = (
        check.describe()
        if check.finding is Finding.INTACT
        else f"target {table.target} is a Delta table ({check.describe()})"
    )
    if not full:
        return found(True, identity)
    strategy = access.modes.strategy(table)
    if not strategy.copies_source:
        return found(
            True,
            identity,
            note=f"an {table.mode.value} target is a {strategy.keeps}, not a copy of a snapshot: only its identity is checked",
        )
    return found(True, identity, comparison=compare_with_snapshot(access, table, checkpoint))


def compare_with_snapshot(access: TableAccess, table: TableConfig, checkpoint: Checkpoint) -> SnapshotComparison:
    """Keys and rows of the target against the provider's snapshot at the checkpoint version."""
    context = table_context(table, access.client_for(table.provider).metadata(table.name))
    keys = list(table.keys) if access.modes.strategy(table).keyed else []
    source = _snapshot_keys(access, context, checkpoint.version, keys)
    target = _target_keys(access, table, keys)
    if not keys:
        return SnapshotComparison(checkpoint.version, source.num_rows, target.num_rows)
    wanted, held = _key_set(source), _key_set(target)
    missing, extra = wanted - held, held - wanted
    examples = [f"missing {k}" for k in sorted(missing, key=repr)[:EXAMPLES]]
    examples += [f"extra {k}" for k in sorted(extra, key=repr)[:EXAMPLES]]
    return SnapshotComparison(
        checkpoint.version, source.num_rows, target.num_rows, len(missing), len(extra), tuple(examples)
    )


def _snapshot_keys(access: TableAccess, context: TableContext, version: int, keys: list[str]) -> pa.Table:
    """The snapshot's key columns (none in snapshot mode), filtered as configured: one row per row."""
    import pyarrow.dataset as ds

    from sharesync.pipelines.jobs.staged import staged_files
    from sharesync.sync.predicates import columns_referenced, to_arrow
    from sharesync.sync.staging import batch as batches
    from sharesync.sync.staging.files import StageLayout

    config, expr = access.config, context.expr
    result = _query(access, context, version)
    schema = result.metadata.table_schema
    files, _ = batches.prune(batches.snapshot_change_files(result), expr, schema)
    layout = StageLayout.build(
        schema, result.metadata.partition_columns, [*keys, *(columns_referenced(expr) if expr else ())]
    )
    directory = batches.batch_dir(access.locate(config.staging_dir), context.table.key, f"verify-{version}")
    try:
        staged = batches.stage(
            access.client_for(context.table.provider),
            result,
            files,
            layout,
            directory,
            concurrency=config.concurrency(context.table),
            ca_bundle=config.ca_bundle,
            snapshot=True,
        )
        paths = [f.path for f in staged_files(staged.path)]
        dataset = ds.dataset(paths, format="parquet", filesystem=staged.path.filesystem)
        keep = to_arrow(expr, dataset.schema) if expr is not None else None
        return dataset.to_table(columns=spelled(layout.columns, keys), filter=keep)
    finally:
        batches.remove_batch(directory)


def _query(access: TableAccess, context: TableContext, version: int) -> QueryResult:
    """The snapshot at ``version``: the latest one when that is still the provider's version."""
    name, hints = context.table.name, context.hints
    client = access.client_for(context.table.provider)
    if version >= context.metadata.version:
        result = client.query(
            name, predicate_hints=hints.predicate_hints, json_predicate_hints=hints.json_predicate_hints
        )
        if result.version == version:
            return result
    return client.query(
        name, version=version, predicate_hints=hints.predicate_hints, json_predicate_hints=hints.json_predicate_hints
    )


def _target_keys(access: TableAccess, table: TableConfig, keys: list[str]) -> pa.Table:
    """The target's key columns (none in snapshot mode) of its live rows (soft-deleted ones and,
    in history mode, rows no longer current left out)."""
    import pyarrow.compute as pc

    target = access.locate(table.target)
    found = DELTA.identity(target)
    names = list(found.columns) if found is not None else []
    wanted = spelled(names, keys)
    flag = DELETED_COLUMN if table.soft_delete else access.modes.strategy(table).current_flag
    flag = flag if flag in names else None
    rows = DELTA.rows(target, [*(wanted or names[:1]), *([flag] if flag else [])]) if found is not None else None
    if rows is None:
        raise TargetError(f"target {table.target} is gone (no Delta table there); the next sync rebuilds it")
    if flag == DELETED_COLUMN:
        rows = rows.filter(pc.invert(pc.fill_null(rows.column(flag), False)))
    elif flag is not None:
        rows = rows.filter(pc.fill_null(rows.column(flag), False))
    return rows.select(wanted)


def _key_set(rows: pa.Table) -> set[Key]:
    """The key tuples of ``rows``, whose columns are the keys in their configured order."""
    return set(zip(*(column.to_pylist() for column in rows.columns), strict=True))
