"""Add a batch's new columns to a target before the write: one rule for merge and history mode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sharesync.pipelines.targets.delta.write import WRITER
from sharesync.pipelines.targets.state import TargetState
from sharesync.sync.core.errors import SchemaIncompatible

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["add_empty_columns"]


def add_empty_columns(df: DataFrame, state: TargetState, new: Sequence[Column], wanted: Sequence[str]) -> None:
    """Add the nullable columns ``new`` (named ``wanted``) with an empty ``mergeSchema`` append:
    a metadata-only commit.

    Why not ``mergeInto(...).withSchemaEvolution()``: Sail rejects explicit ``UPDATE SET`` /
    ``INSERT`` assignments to a column the target lacks ("attribute … is missing from the
    schema"), and ``updateAll``/``insertAll`` would add the change-feed columns as well.
    Adding the columns first is idempotent: after a crash the retry finds them and goes on.
    """
    cannot = (
        f"could not add the new column(s) {sorted(wanted)} to target '{state.path}' (targets with NOT NULL columns "
        "cannot evolve on this engine); run 'sharesync reset' for this table to re-bootstrap it with the new schema"
    )
    try:
        WRITER.save(df.select(*new).limit(0), state.location, mode="append", schema="merge")
    except Exception as exc:  # noqa: BLE001 - the engine's own error, translated with the fix
        raise SchemaIncompatible(f"{cannot}. Engine said: {exc}") from None
    present = {c.lower() for c in WRITER.state(state.location).column_names}
    if any(c.lower() not in present for c in wanted):
        # Sail's mergeSchema may also add nothing, silently, to a table with NOT NULL columns.
        raise SchemaIncompatible(cannot)
