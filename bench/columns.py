"""Vectorised column builders for the benchmark's provider tables (:mod:`bench.shapes` uses them).

A builder takes the seeded generator and the keys of the rows and returns one Arrow array, built
with numpy/pyarrow and never a Python loop over rows, so 50 M rows generate in minutes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_EPOCH_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
_EPOCH_DAY = 19_723  # 2024-01-01
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")

Builder = Callable[[np.random.Generator, np.ndarray], pa.Array]


def choice(values: tuple[str, ...]) -> Builder:
    def build(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
        indices = pa.array(rng.integers(0, len(values), len(ids), dtype=np.int32))
        return pa.DictionaryArray.from_arrays(indices, pa.array(values)).cast(pa.string())

    return build


def ints(low: int, high: int, dtype: type[np.integer]) -> Builder:
    return lambda rng, ids: pa.array(rng.integers(low, high, len(ids), dtype=dtype))


def floats(low: float, high: float, decimals: int, dtype: type[np.floating] = np.float64) -> Builder:
    return lambda rng, ids: pa.array(np.round(rng.uniform(low, high, len(ids)), decimals).astype(dtype))


def decimal(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    cents = rng.integers(-9_999_999, 10_000_000, len(ids)) / 100.0
    return pa.array(cents).cast(pa.decimal128(10, 2), safe=False)


def label(words: tuple[str, ...], sep: str = "-") -> Builder:
    """``<word><sep><id>``: unique per key, like a name or an e-mail address."""
    word = choice(words)
    return lambda rng, ids: pc.binary_join_element_wise(word(rng, ids), pc.cast(pa.array(ids), pa.string()), sep)


@functools.cache
def vocabulary() -> tuple[str, ...]:
    rng = np.random.default_rng(12345)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    return tuple(bytes(letters[rng.integers(0, 26, int(rng.integers(2, 11)))]).decode() for _ in range(512))


def text(words: int) -> Builder:
    """``words`` words from a 512-word vocabulary: free text, many distinct values."""

    def build(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
        pick = choice(vocabulary())
        return pc.binary_join_element_wise(*(pick(rng, ids) for _ in range(words)), " ")

    return build


def hex32(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    """32 random hex digits (a UUID without dashes): incompressible, never repeats."""
    n = len(ids)
    raw = np.frombuffer(rng.bytes(16 * n), dtype=np.uint8).reshape(n, 16)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    chars = np.empty((n, 32), dtype=np.uint8)
    chars[:, 0::2], chars[:, 1::2] = digits[raw >> 4], digits[raw & 15]
    offsets = np.arange(0, 32 * n + 1, 32, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(chars.tobytes()))


def binary(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    n = len(ids)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(rng.integers(0, 9, n, dtype=np.int32), out=offsets[1:])
    data = pa.py_buffer(rng.bytes(int(offsets[-1])))
    return pa.BinaryArray.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets.tobytes()), data])


def bools(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    return pa.array(rng.random(len(ids)) < 0.5)


def days(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    return pa.array((_EPOCH_DAY + rng.integers(0, 366, len(ids))).astype(np.int32)).cast(pa.date32())


def timestamps(rng: np.random.Generator, ids: np.ndarray) -> pa.Array:
    micros = _EPOCH_US + rng.integers(0, 10**13, len(ids), dtype=np.int64)
    return pa.array(micros).cast(pa.timestamp("us", tz="UTC"))
