"""Z85 (ZeroMQ RFC 32) decoding, the base-85 variant Delta uses for inline DVs and DV file ids.

Z85 and :func:`base64.b85decode` share the arithmetic (five digits, base 85, big-endian to four
bytes) and differ only in the alphabet, so decoding is a character translation plus the stdlib's
C-speed decoder; no dependency (pyzmq) needed for fifteen characters of table.
"""

from __future__ import annotations

import base64

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_B85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
_TO_B85 = str.maketrans(_Z85, _B85)
_Z85_CHARS = frozenset(_Z85)


def z85_decode(text: str) -> bytes:
    """The bytes ``text`` encodes; ``ValueError`` unless it is whole 5-character Z85 groups."""
    if len(text) % 5:
        raise ValueError(f"Z85 text has {len(text)} characters, not a multiple of 5")
    bad = set(text) - _Z85_CHARS
    if bad:
        # Checked first: some of these are valid in the b85 alphabet and would decode silently.
        raise ValueError(f"Z85 text has characters outside the alphabet: {''.join(sorted(bad))!r}")
    return base64.b85decode(text.translate(_TO_B85))
