"""Z85 decoding (RFC 32), the base-85 of inline DVs and DV file ids."""

from __future__ import annotations

import pytest

from sharesync.sync.delta.z85 import z85_decode


def test_z85_rfc_vector_and_errors() -> None:
    assert z85_decode("HelloWorld") == bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    with pytest.raises(ValueError, match="multiple of 5"):
        z85_decode("Hell")
    with pytest.raises(ValueError, match="outside the alphabet"):
        z85_decode("Hell~")  # '~' is a b85 digit, not a Z85 one
