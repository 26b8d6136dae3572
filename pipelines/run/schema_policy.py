"""A table's schema-change policy (``on_new_column``, ``on_breaking_change``) turned into decisions.

Pure apart from :func:`new_columns`'s look at the target's schema, and only for a table that
does not take new columns as they come (the default, ``add``, needs none: the jobs add them).

* ``on_new_column: ignore`` — the table's pass runs with ``columns`` set to the columns the
  target already has, so a new provider column is neither downloaded nor written, in every batch
  of every pass; the pass that moves past the column's addition says so once, as a warning (run
  record, result, Dagster metadata), later passes stay quiet. Which columns are news is read from
  the provider's metadata at the checkpoint version (``/metadata?version=``); a provider that
  answers another version instead has its answer refused, and the warning is given again with
  that reason, never skipped.
* ``on_new_column: fail`` — the pass stops before anything is downloaded.
* ``on_breaking_change: rebuild`` — a batch refused for a breaking change
  (:class:`~sharesync.sync.core.errors.SchemaIncompatible` with ``change`` set: nothing was
  written) is answered by re-planning with ``PlanOptions.schema_change``: a re-bootstrap at the
  latest version, as after a history gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sharesync.sync.core.errors import SchemaIncompatible, SharingHTTPError, VersionMismatch
from sharesync.sync.core.table_config import BreakingChangePolicy, NewColumnPolicy, TableConfig

if TYPE_CHECKING:
    from sharesync.state import Checkpoint
    from sharesync.sync.core.location import Location
    from sharesync.sync.protocol.client import SharingClient
    from sharesync.sync.protocol.responses import TableMetadata

__all__ = ["NewColumns", "judge_new_columns", "new_columns", "rebuild_change"]


@dataclass(frozen=True)
class NewColumns:
    """The table settings a pass runs with, and what it must say about them (None: nothing)."""

    table: TableConfig
    warning: str | None = None


def judge_new_columns(
    table: TableConfig, source: Sequence[str], target: Sequence[str] | None, *, known: Sequence[str] | None = None
) -> NewColumns:
    """Apply ``on_new_column`` to the provider's columns ``source`` and the target's ``target``
    (None: no target yet). ``known``: the provider's columns at the checkpoint — an ignored column
    already there was reported by the pass that moved past its addition, so only the others are
    news (None: unknown, all are). Names match in any case, as the engines resolve them."""
    if target is None or table.columns is not None or table.on_new_column is NewColumnPolicy.ADD:
        return NewColumns(table)  # nothing there yet, a fixed projection, or new columns welcome
    present = {name.lower() for name in target}
    new = [name for name in source if name.lower() not in present]
    if not new:
        return NewColumns(table)
    if table.on_new_column is NewColumnPolicy.FAIL:
        raise SchemaIncompatible(
            f"the provider added column(s) {new} and on_new_column is 'fail', so nothing was written. Set "
            "on_new_column to 'add' or 'ignore' for this table, or list the columns to keep in 'columns'"
        )
    keys = {key.lower() for key in table.keys}
    kept = [name for name in source if name.lower() in present and name.lower() not in keys]
    seen = {name.lower() for name in known or ()}
    news = [name for name in new if name.lower() not in seen]
    warning = f"on_new_column is 'ignore': the provider's new column(s) {news} are left out of the target"
    return NewColumns(table.model_copy(update={"columns": kept}), warning if news else None)


def new_columns(
    table: TableConfig, target: Location, metadata: TableMetadata, client: SharingClient, checkpoint: Checkpoint | None
) -> NewColumns:
    """:func:`judge_new_columns` against the target as it is now, read only when the policy needs
    it; the provider's columns at the ``checkpoint`` version are asked for only to word the warning."""
    if table.columns is not None or table.on_new_column is NewColumnPolicy.ADD:
        return NewColumns(table)
    from sharesync.pipelines.targets.delta.format import DELTA

    source = metadata.metadata.table_schema.names
    state = DELTA.inspect(target)
    decided = judge_new_columns(table, source, state.column_names if state.exists else None)
    if decided.warning is None or checkpoint is None:
        return decided
    try:
        known = client.metadata(table.name, version=checkpoint.version).metadata.table_schema.names
    except SharingHTTPError:  # no history shared, or gone: say it again rather than never
        return decided
    except VersionMismatch:  # its columns would be the new ones: say it again, and why
        why = (
            f"said again: the provider ignored the version asked for (/metadata?version={checkpoint.version}), so "
            "whether an earlier pass said so is unknown"
        )
        return NewColumns(decided.table, f"{decided.warning} ({why})")
    return judge_new_columns(table, source, state.column_names, known=known)


def rebuild_change(table: TableConfig, exc: SchemaIncompatible) -> str | None:
    """What changed at the provider when ``table`` answers ``exc`` with a rebuild; None: it fails."""
    return exc.change if table.on_breaking_change is BreakingChangePolicy.REBUILD else None
