"""Deletion vectors (DVs): where one is stored and which rows of its data file it deletes.

Follows Delta PROTOCOL.md, "Deletion Vectors" and "Deletion Vector Format". A DV is inline in
the log (``i``, Z85 text), or in a DV file: at a path relative to the table root derived from a
UUID (``u``), or at an absolute path (``p``; the sharing server hands out a presigned URL). The
caller fetches DV files; this module only decodes bytes, so it never touches the network.

Every malformation is a :class:`ProtocolViolation` naming what was wrong: the rows a reader
drops must be exactly the rows the writer deleted, so nothing is guessed or skipped.
"""

from __future__ import annotations

import uuid
import zlib
from typing import Literal

from pyroaring import BitMap, FrozenBitMap64

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.properties import DeletionVectorDescriptor, StorageType
from sharesync.sync.delta.row_positions import RowPositions
from sharesync.sync.delta.z85 import z85_decode

__all__ = ["DeletionVectorDescriptor", "StorageType", "decode_deletion_vector", "relative_dv_file", "relative_dv_path"]

_FILE_FORMAT_VERSION = 1
_MAGIC = 1681511377  # RoaringBitmapArray in the portable 64-bit layout, little-endian
_MAGIC_NATIVE = 1681511376  # Delta's earlier "native" RoaringBitmapArray layout
_UUID_CHARS = 20  # a UUID's 16 bytes in Z85
_KEY_LIMIT = 1 << 63  # every 32-bit key has its top bit clear (Java reads keys signed)


def relative_dv_path(dv: DeletionVectorDescriptor) -> str:
    """For storage type ``u``: the DV file's path relative to the table root."""
    if dv.storage_type != "u":
        raise ValueError(f"only storage type 'u' has a relative path, not {dv.storage_type!r}")
    return relative_dv_file(dv.path_or_inline_dv)


def relative_dv_file(path_or_inline_dv: str) -> str:
    """The file a ``u`` descriptor's ``pathOrInlineDv`` names, relative to the table root (the one
    copy of the rule: the sharing server resolves its on-disk DVs with it too).

    ``pathOrInlineDv`` is an optional random prefix (a directory) followed by the file's UUID in
    20 Z85 characters; the file is ``<prefix>/deletion_vector_<uuid>.bin``.
    """
    text = path_or_inline_dv
    if len(text) < _UUID_CHARS:
        raise ProtocolViolation(f"deletion vector path {text!r} is shorter than a Z85 UUID ({_UUID_CHARS} chars)")
    prefix, encoded = text[:-_UUID_CHARS], text[-_UUID_CHARS:]
    try:
        file_uuid = uuid.UUID(bytes=z85_decode(encoded))
    except ValueError as exc:
        raise ProtocolViolation(f"deletion vector path {text!r} does not end in a Z85 UUID: {exc}") from None
    name = f"deletion_vector_{file_uuid}.bin"
    return f"{prefix}/{name}" if prefix else name


def decode_deletion_vector(dv: DeletionVectorDescriptor, dv_file: bytes | None = None) -> RowPositions:
    """The row positions ``dv`` deletes.

    ``dv_file`` is the whole DV file (storage types ``u`` and ``p``; one file may hold several
    DVs at different offsets); inline DVs need none.
    """
    if dv.storage_type == "i":
        return _bitmap(_inline_bytes(dv), dv)
    if dv_file is None:
        raise ValueError(f"deletion vector {_describe(dv)} is stored in a file; pass the file's bytes")
    return _bitmap(_stored_bytes(dv, dv_file), dv)


def _inline_bytes(dv: DeletionVectorDescriptor) -> bytes:
    try:
        raw = z85_decode(dv.path_or_inline_dv)
    except ValueError as exc:
        raise ProtocolViolation(f"inline deletion vector is not Z85 text: {exc}") from None
    # The encoder pads to whole 4-byte groups; sizeInBytes is the length before padding.
    if not dv.size_in_bytes <= len(raw) < dv.size_in_bytes + 4:
        raise ProtocolViolation(
            f"inline deletion vector decodes to {len(raw)} bytes, but sizeInBytes is {dv.size_in_bytes}"
        )
    return raw[: dv.size_in_bytes]


def _stored_bytes(dv: DeletionVectorDescriptor, data: bytes) -> bytes:
    """The bitmap bytes of ``dv`` in its DV file, with the file's framing and CRC-32 checked."""
    where = _describe(dv)
    if not data:
        raise ProtocolViolation(f"deletion vector file {where} is empty")
    if data[0] != _FILE_FORMAT_VERSION:
        raise ProtocolViolation(
            f"deletion vector file {where} has format version {data[0]}; only {_FILE_FORMAT_VERSION} is known"
        )
    # The spec reads an absent offset as 0, but 0 is the version byte: read the file's first DV,
    # which starts right after it (where every writer puts it; Sail writes offset 1).
    start = 1 if dv.offset is None else dv.offset
    if start < 1:
        raise ProtocolViolation(f"deletion vector in {where} has offset {start}, inside the file header")
    data_start = start + 4
    if len(data) < data_start:
        raise ProtocolViolation(f"deletion vector file {where} is truncated: {len(data)} bytes, offset {start}")
    size = int.from_bytes(data[start:data_start], "big")
    if size != dv.size_in_bytes:
        raise ProtocolViolation(
            f"deletion vector in {where} at offset {start} is {size} bytes, but sizeInBytes is {dv.size_in_bytes}"
        )
    data_end = data_start + size
    if len(data) < data_end + 4:
        raise ProtocolViolation(
            f"deletion vector file {where} is truncated: {len(data)} bytes, "
            f"the {size}-byte DV at offset {start} and its checksum need {data_end + 4}"
        )
    bitmap = data[data_start:data_end]
    stored = int.from_bytes(data[data_end : data_end + 4], "big")
    actual = zlib.crc32(bitmap)
    if stored != actual:
        raise ProtocolViolation(
            f"deletion vector in {where} at offset {start} fails its CRC-32 check "
            f"(stored {stored:#010x}, computed {actual:#010x})"
        )
    return bitmap


def _bitmap(raw: bytes, dv: DeletionVectorDescriptor) -> RowPositions:
    """Decode a RoaringBitmapArray: a magic number, then the bitmaps.

    The spec's format (magic 1681511377) is the portable 64-bit roaring layout, which pyroaring's
    64-bit deserializer reads in C, rejecting malformed or truncated input. Delta's older
    "native" layout (magic 1681511376; the spec's inline example uses it) is re-framed into it.
    """
    where = _describe(dv)
    if len(raw) < 4:
        raise ProtocolViolation(f"deletion vector {where} is {len(raw)} bytes, too short for its magic number")
    if int.from_bytes(raw[:4], "little") == _MAGIC:
        portable = raw[4:]
    elif _MAGIC_NATIVE.to_bytes(4, "little") == raw[:4]:
        portable = _native_to_portable(raw[4:], "little", where)
    elif _MAGIC_NATIVE.to_bytes(4, "big") == raw[:4]:
        portable = _native_to_portable(raw[4:], "big", where)
    else:
        magic = int.from_bytes(raw[:4], "little")
        raise ProtocolViolation(f"deletion vector {where} has magic number {magic}; expected {_MAGIC}")
    try:
        positions = FrozenBitMap64.deserialize(portable)
    except (ValueError, IndexError):
        raise ProtocolViolation(f"deletion vector {where} is not a valid 64-bit roaring bitmap") from None
    if positions and positions.max() >= _KEY_LIMIT:
        raise ProtocolViolation(f"deletion vector {where} has a bucket key with its top bit set")
    if len(positions) != dv.cardinality:
        raise ProtocolViolation(
            f"deletion vector {where} holds {len(positions)} row positions, but its cardinality is {dv.cardinality}"
        )
    return RowPositions(positions)


def _native_to_portable(body: bytes, order: Literal["little", "big"], where: str) -> bytes:
    """Native layout (bitmap count, then each 32-bit bitmap with its byte size; the key is its
    index) as the portable one (bucket count, then each key with its bitmap)."""
    truncated = ProtocolViolation(f"deletion vector {where} is truncated inside its bitmap array")
    if len(body) < 4:
        raise truncated
    count, pos, buckets = int.from_bytes(body[:4], order), 4, []
    for key in range(count):
        if len(body) < pos + 4:
            raise truncated
        size = int.from_bytes(body[pos : pos + 4], order)
        pos += 4
        if len(body) < pos + size:
            raise truncated
        try:
            BitMap.deserialize(body[pos : pos + size])  # each bitmap checked on its own
        except (ValueError, IndexError):  # pyroaring raises IndexError on a short buffer
            raise ProtocolViolation(f"deletion vector {where}: bitmap {key} is not a valid roaring bitmap") from None
        buckets.append(key.to_bytes(4, "little") + body[pos : pos + size])
        pos += size
    return len(buckets).to_bytes(8, "little") + b"".join(buckets)


def _describe(dv: DeletionVectorDescriptor) -> str:
    """A name for errors: never the inline payload, never a presigned URL's query string."""
    if dv.storage_type == "i":
        return "(inline)"
    if dv.storage_type == "u":
        return repr(dv.path_or_inline_dv)
    return repr(dv.path_or_inline_dv.split("?", 1)[0])
