"""Sets of row positions in one data file, and dropping or keeping those rows in Arrow data.

A deletion vector decodes to one of these. Staging streams a file in record batches, so every
operation takes the position of the batch's first row in the file; a batch with no position in
the set passes through untouched (no copy). Kept rows are gathered with ``take`` on indices that
the roaring library computes in C: no per-row Python and no numpy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64, FrozenBitMap64

from sharesync.sync.core.errors import ProtocolViolation

ArrowData = TypeVar("ArrowData", pa.Table, pa.RecordBatch)


@dataclass(frozen=True)
class RowPositions:
    """Zero-based row positions in one data file (a DV's deleted rows, or a difference of two DVs)."""

    bitmap: FrozenBitMap64

    @classmethod
    def of(cls, positions: Iterable[int]) -> RowPositions:
        return cls(FrozenBitMap64(positions))

    def __len__(self) -> int:
        return len(self.bitmap)

    def minus(self, other: RowPositions) -> RowPositions:
        """Positions here and not in ``other``: new DV minus old DV = rows a version deleted."""
        return RowPositions(self.bitmap - other.bitmap)

    def to_arrow(self) -> pa.UInt64Array:
        """The positions, ascending."""
        return _uint64(self.bitmap)

    def check_within(self, num_rows: int, what: str) -> None:
        """A position at or past the end of the file means the DV belongs to another file."""
        if self.bitmap and self.bitmap.max() >= num_rows:
            raise ProtocolViolation(
                f"deletion vector of {what} marks row {self.bitmap.max()}, but the file has {num_rows} rows"
            )

    def drop_from(self, data: ArrowData, first_row: int = 0) -> ArrowData:
        """``data`` (rows ``first_row`` … of the file) without the rows in this set."""
        end = first_row + data.num_rows
        if not self.bitmap or self.bitmap.range_cardinality(first_row, end) == 0:
            return data
        kept = BitMap64()
        kept.add_range(first_row, end)
        kept.difference_update(self.bitmap)
        return data.take(_rebased(kept, first_row))

    def keep_only(self, data: ArrowData, first_row: int = 0) -> ArrowData:
        """Only the rows of ``data`` (rows ``first_row`` … of the file) that are in this set."""
        end = first_row + data.num_rows
        if self.bitmap.range_cardinality(first_row, end) == data.num_rows:
            return data
        window = BitMap64()
        window.add_range(first_row, end)
        return data.take(_rebased(window & self.bitmap, first_row))


NO_ROWS = RowPositions(FrozenBitMap64())


def _uint64(bitmap: BitMap64 | FrozenBitMap64) -> pa.UInt64Array:
    values = bitmap.to_array()  # array('Q'): wrapped, not copied
    return pa.Array.from_buffers(pa.uint64(), len(values), [None, pa.py_buffer(values)])


def _rebased(bitmap: BitMap64 | FrozenBitMap64, first_row: int) -> pa.UInt64Array:
    """File positions as indices into a batch that starts at ``first_row``."""
    positions = _uint64(bitmap)
    if first_row == 0:
        return positions
    return pc.subtract(positions, pa.scalar(first_row, pa.uint64()))
