"""Deletion-vector descriptors: where a DV's bytes live, and the presigned form the server hands out.

A provider's log points at DV files relative to the table (``storageType: "u"``: an optional
random prefix plus a Z85-encoded UUID) or carries small DVs inline (``"i"``). A recipient
cannot resolve a relative path against storage it cannot list, so the reference server rewrites
every on-disk DV to ``storageType: "p"`` with a presigned URL (delta-io/delta-sharing,
``DeltaSharedTableKernel.getResponseAddFile``); inline DVs pass unchanged. Spec: Delta protocol
"Deletion Vector Descriptor Schema". Pure functions; the relative-path rule is
:func:`sharesync.sync.delta.deletion_vectors.relative_dv_file`, the client's own.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharesync.sync.core.errors import ProtocolViolation
from sharesync.sync.delta.deletion_vectors import relative_dv_file


class DeletionVectorError(ValueError):
    """A DV descriptor the server cannot resolve (bad encoding, unknown storage type)."""


@dataclass(frozen=True)
class DeletionVector:
    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_json(cls, value: dict[str, object]) -> DeletionVector:
        def number(key: str) -> int | None:
            item = value.get(key)
            return int(item) if isinstance(item, int | float | str) else None

        return cls(
            storage_type=str(value.get("storageType", "")),
            path_or_inline_dv=str(value.get("pathOrInlineDv", "")),
            size_in_bytes=number("sizeInBytes") or 0,
            cardinality=number("cardinality") or 0,
            offset=number("offset"),
        )

    def relative_path(self) -> str:
        """The DV file of a ``u`` descriptor, relative to the table: ``<prefix>/deletion_vector_<uuid>.bin``."""
        if self.storage_type != "u":
            raise DeletionVectorError(f"storage type {self.storage_type!r} has no table-relative path")
        try:
            return relative_dv_file(self.path_or_inline_dv)
        except ProtocolViolation as exc:
            raise DeletionVectorError(str(exc)) from None

    def presigned(self, url: str) -> dict[str, object]:
        """The descriptor as the client gets it: the DV file behind a presigned URL (``p``)."""
        result: dict[str, object] = {
            "storageType": "p",
            "pathOrInlineDv": url,
            "sizeInBytes": self.size_in_bytes,
            "cardinality": self.cardinality,
        }
        if self.offset is not None:
            result["offset"] = self.offset
        return result
