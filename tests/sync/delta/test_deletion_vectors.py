"""Deletion vectors: decoded from files Sail wrote, checked against the rows Sail's DELETEs removed.

The spec's own examples pin the Z85 path and inline layouts; corrupted copies of a real DV file
prove each malformation gets its own clear error.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap, BitMap64

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.deletion_vectors import (
    DeletionVectorDescriptor,
    decode_deletion_vector,
    relative_dv_path,
)
from sharesync.sync.delta.row_positions import NO_ROWS, RowPositions

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_MAGIC = (1681511377).to_bytes(4, "little")


def z85_encode(data: bytes) -> str:
    """RFC 32 Z85 by its arithmetic (independent of the decoder's alphabet translation); pads to 4 bytes as Delta does."""
    padded = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(padded), 4):
        value, group = int.from_bytes(padded[i : i + 4], "big"), []
        for _ in range(5):
            value, digit = divmod(value, 85)
            group.append(_Z85[digit])
        out.extend(reversed(group))
    return "".join(out)


def _dv_adds(table: Any, version: int) -> list[dict[str, Any]]:
    return [a for a in table.adds(version) if a.get("deletionVector")]


def _load(table: Any, add: dict[str, Any]) -> tuple[DeletionVectorDescriptor, bytes]:
    dv = DeletionVectorDescriptor.from_json(add["deletionVector"])
    return dv, (table.path / relative_dv_path(dv)).read_bytes()


def _ids(path: Path) -> list[int]:
    return pq.ParquetFile(path).read(columns=["id"]).column("id").to_pylist()


# --- the spec's examples -------------------------------------------------------------------


def test_relative_path_of_spec_example_1() -> None:
    dv = DeletionVectorDescriptor.from_json(
        {
            "storageType": "u",
            "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
            "offset": 4,
            "sizeInBytes": 40,
            "cardinality": 6,
        }
    )
    assert relative_dv_path(dv) == "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert dv.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"


def test_relative_path_without_prefix() -> None:
    dv = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^"[2:], 40, 6, 1)
    assert relative_dv_path(dv) == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


def test_inline_spec_example_3() -> None:
    # This example uses Delta's "native" RoaringBitmapArray layout (magic 1681511376).
    dv = DeletionVectorDescriptor.from_json(
        {
            "storageType": "i",
            "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
            "sizeInBytes": 40,
            "cardinality": 6,
        }
    )
    assert list(decode_deletion_vector(dv).bitmap) == [3, 4, 7, 11, 18, 29]
    assert dv.unique_id == "iwi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"


# --- DVs Sail wrote ----------------------------------------------------------------------


def test_sail_writes_u_dvs(dv_table: Any) -> None:
    protocol = dv_table.protocol()
    assert "deletionVectors" in protocol["readerFeatures"]
    assert {a["deletionVector"]["storageType"] for v in (2, 3) for a in _dv_adds(dv_table, v)} == {"u"}


@pytest.mark.parametrize("version", [2, 3])
def test_decoded_positions_are_the_deleted_rows(
    dv_table: Any, dv_deletes: dict[int, Callable[[int], bool]], version: int
) -> None:
    """Positions in each DV hold exactly the ids every DELETE up to ``version`` removed from that file."""
    deleted_by = [p for v, p in dv_deletes.items() if v <= version]
    adds = _dv_adds(dv_table, version)
    assert adds
    for add in adds:
        dv, data = _load(dv_table, add)
        positions = decode_deletion_vector(dv, data)
        ids = _ids(dv_table.path / add["path"])
        positions.check_within(len(ids), add["path"])
        assert len(positions) == dv.cardinality
        assert {ids[p] for p in positions.bitmap} == {i for i in ids if any(p(i) for p in deleted_by)}


def test_dropping_deleted_rows_equals_what_sail_reads(spark: Any, dv_table: Any) -> None:
    for version in (2, 3):
        live: list[int] = []
        for add in _all_files_at(dv_table, version):
            table = pq.ParquetFile(dv_table.path / add["path"]).read()
            dv = add.get("deletionVector")
            positions = decode_deletion_vector(*_load(dv_table, add)) if dv else NO_ROWS
            live += positions.drop_from(table).column("id").to_pylist()
        sail = spark.read.format("delta").option("versionAsOf", version).load(str(dv_table.path))
        assert sorted(live) == sorted(r.id for r in sail.select("id").collect())


def test_batches_drop_and_keep_the_same_rows_as_the_whole_file(dv_table: Any) -> None:
    add = _dv_adds(dv_table, 3)[0]
    positions = decode_deletion_vector(*_load(dv_table, add))
    table = pq.ParquetFile(dv_table.path / add["path"]).read()
    kept, only = [], []
    for start in range(0, table.num_rows, 97):
        batch = table.slice(start, 97).to_batches()[0]
        kept += positions.drop_from(batch, start).column("id").to_pylist()
        only += positions.keep_only(batch, start).column("id").to_pylist()
    assert kept == positions.drop_from(table).column("id").to_pylist()
    assert only == positions.keep_only(table).column("id").to_pylist()
    assert len(only) == len(positions) and len(kept) == table.num_rows - len(positions)
    untouched = table.slice(522, 2)  # rows 522, 523: none deleted -> the same object back
    assert positions.drop_from(untouched, 522) is untouched


def test_difference_of_old_and_new_dv_is_the_later_delete(
    dv_table: Any, dv_deletes: dict[int, Callable[[int], bool]]
) -> None:
    """What a change feed derives from a remove+add of one file: rows the new DV adds were deleted."""
    (removed,) = [r for r in dv_table.removes(3) if r.get("deletionVector")]
    (added,) = [a for a in _dv_adds(dv_table, 3) if a["path"] == removed["path"]]
    old = decode_deletion_vector(*_load(dv_table, removed))
    new = decode_deletion_vector(*_load(dv_table, added))
    ids = _ids(dv_table.path / added["path"])
    newly_deleted = new.minus(old)
    assert {ids[p] for p in newly_deleted.bitmap} == {i for i in ids if dv_deletes[3](i) and not dv_deletes[2](i)}
    assert len(old.minus(new)) == 0
    table = pq.ParquetFile(dv_table.path / added["path"]).read()
    assert newly_deleted.keep_only(table).column("id").to_pylist() == [ids[p] for p in newly_deleted.bitmap]


# --- corrupted copies of a real DV file -------------------------------------------------


@pytest.fixture
def real_dv(dv_table: Any) -> tuple[DeletionVectorDescriptor, bytes]:
    return _load(dv_table, _dv_adds(dv_table, 3)[0])


def _with_crc(data: bytearray, dv: DeletionVectorDescriptor) -> bytes:
    """Recompute the stored CRC-32, so a corruption inside the bitmap reaches the bitmap checks."""
    start = (dv.offset or 1) + 4
    end = start + dv.size_in_bytes
    data[end : end + 4] = zlib.crc32(bytes(data[start:end])).to_bytes(4, "big")
    return bytes(data)


def test_corrupt_crc(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    broken = bytearray(data)
    broken[-1] ^= 0xFF
    with pytest.raises(ProtocolViolation, match="CRC-32"):
        decode_deletion_vector(dv, bytes(broken))


def test_flipped_bitmap_byte_fails_the_crc(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    broken = bytearray(data)
    broken[(dv.offset or 1) + 4 + 20] ^= 0x01
    with pytest.raises(ProtocolViolation, match="CRC-32"):
        decode_deletion_vector(dv, bytes(broken))


def test_wrong_magic(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    broken = bytearray(data)
    broken[(dv.offset or 1) + 4 + 2] ^= 0x80
    with pytest.raises(ProtocolViolation, match="magic number"):
        decode_deletion_vector(dv, _with_crc(broken, dv))


def test_native_magic_on_portable_bytes(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    """One bit turns the portable magic into the native one: the framing then no longer fits."""
    dv, data = real_dv
    broken = bytearray(data)
    broken[(dv.offset or 1) + 4] ^= 0x01
    with pytest.raises(ProtocolViolation, match="bitmap 0 is not a valid roaring bitmap"):
        decode_deletion_vector(dv, _with_crc(broken, dv))


def test_wrong_format_version(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    with pytest.raises(ProtocolViolation, match="format version 2"):
        decode_deletion_vector(dv, b"\x02" + data[1:])


@pytest.mark.parametrize("keep", [0, 3, 30, -1])
def test_truncated_file(real_dv: tuple[DeletionVectorDescriptor, bytes], keep: int) -> None:
    dv, data = real_dv
    with pytest.raises(ProtocolViolation, match="empty|truncated"):
        decode_deletion_vector(dv, data[:keep])


def test_size_in_file_differs_from_descriptor(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    wrong = DeletionVectorDescriptor("u", dv.path_or_inline_dv, dv.size_in_bytes + 1, dv.cardinality, dv.offset)
    with pytest.raises(ProtocolViolation, match=f"but sizeInBytes is {dv.size_in_bytes + 1}"):
        decode_deletion_vector(wrong, data)


def test_cardinality_mismatch(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    wrong = DeletionVectorDescriptor("p", "https://x.example/dv.bin?sig=s3cr3t", dv.size_in_bytes, 1, dv.offset)
    with pytest.raises(ProtocolViolation, match="but its cardinality is 1") as caught:
        decode_deletion_vector(wrong, data)
    assert "s3cr3t" not in str(caught.value)  # a presigned URL's signature never lands in a message


def test_corrupt_bitmap_with_valid_crc(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    dv, data = real_dv
    broken = bytearray(data)
    start = (dv.offset or 1) + 4
    broken[start + 4 : start + 12] = (7).to_bytes(8, "little")  # claims 7 buckets
    with pytest.raises(ProtocolViolation, match="not a valid 64-bit roaring bitmap"):
        decode_deletion_vector(dv, _with_crc(broken, dv))


def test_file_dv_needs_the_file(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    with pytest.raises(ValueError, match="pass the file's bytes"):
        decode_deletion_vector(real_dv[0])


def test_positions_past_the_file_end(real_dv: tuple[DeletionVectorDescriptor, bytes]) -> None:
    positions = decode_deletion_vector(*real_dv)
    with pytest.raises(ProtocolViolation, match="the file has 10 rows"):
        positions.check_within(10, "part-0.parquet")


# --- inline DVs (hand-built: no available writer produces inline DVs) -------------------


def test_inline_round_trip_with_two_buckets() -> None:
    rows = [0, 5, 65_536, 70_000, (1 << 32) + 3, (5 << 32) + 1]  # three 32-bit keys
    payload = _MAGIC + BitMap64(rows).serialize()
    dv = DeletionVectorDescriptor("i", z85_encode(payload), len(payload), len(rows))
    assert list(decode_deletion_vector(dv).bitmap) == rows
    assert decode_deletion_vector(dv).to_arrow().equals(pa.array(rows, pa.uint64()))


def test_inline_native_layout_little_endian() -> None:
    """Delta's native layout as its Java writer frames it: little-endian count and sizes, key = index."""
    low, high = BitMap([1, 2, 40_000]).serialize(), BitMap([7]).serialize()
    payload = (
        (1681511376).to_bytes(4, "little")
        + (2).to_bytes(4, "little")
        + len(low).to_bytes(4, "little")
        + low
        + len(high).to_bytes(4, "little")
        + high
    )
    dv = DeletionVectorDescriptor("i", z85_encode(payload), len(payload), 4)
    assert list(decode_deletion_vector(dv).bitmap) == [1, 2, 40_000, (1 << 32) + 7]


@pytest.mark.parametrize(
    ("text", "size", "match"),
    [
        ("abc", 4, "not Z85"),
        ("~~~~~", 4, "not Z85"),
        (z85_encode(_MAGIC + BitMap64([1]).serialize()), 8, "decodes to"),
        (z85_encode(b"\x01\x02\x03\x04"), 4, "magic number"),
    ],
)
def test_malformed_inline(text: str, size: int, match: str) -> None:
    with pytest.raises(ProtocolViolation, match=match):
        decode_deletion_vector(DeletionVectorDescriptor("i", text, size, 1))


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ({"storageType": "x", "pathOrInlineDv": "a", "sizeInBytes": 1, "cardinality": 1}, "storageType 'x'"),
        ({"storageType": "u", "sizeInBytes": 1, "cardinality": 1}, "no pathOrInlineDv"),
        ({"storageType": "u", "pathOrInlineDv": "a", "sizeInBytes": -1, "cardinality": 1}, "expected counts"),
        ({"storageType": "p", "pathOrInlineDv": "a", "offset": "1", "sizeInBytes": 1, "cardinality": 1}, "offset"),
    ],
)
def test_malformed_descriptor(raw: dict[str, Any], match: str) -> None:
    with pytest.raises(ProtocolViolation, match=match):
        DeletionVectorDescriptor.from_json(raw)


def test_u_path_that_is_no_uuid() -> None:
    with pytest.raises(ProtocolViolation, match="Z85 UUID"):
        relative_dv_path(DeletionVectorDescriptor("u", "short", 1, 1))
    with pytest.raises(ValueError, match="only storage type 'u'"):
        relative_dv_path(DeletionVectorDescriptor("i", "abcde", 1, 1))


def test_row_positions_of_and_minus() -> None:
    a, b = RowPositions.of([1, 2, 3]), RowPositions.of([2])
    assert list(a.minus(b).bitmap) == [1, 3]
    table = pa.table({"x": list(range(5))})
    assert a.keep_only(table).column("x").to_pylist() == [1, 2, 3]
    assert NO_ROWS.keep_only(table).num_rows == 0
    assert NO_ROWS.drop_from(table) is table


def _all_files_at(table: Any, version: int) -> list[dict[str, Any]]:
    """The live logical files at ``version``, replayed from the JSON log (adds minus removes)."""
    live: dict[str, dict[str, Any]] = {}
    for v in range(version + 1):
        for action in table.actions(v):
            if "remove" in action:
                live.pop(action["remove"]["path"], None)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
    return list(live.values())
