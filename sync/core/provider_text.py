"""Text a provider chose to describe its data (share names and comments, table descriptions,
properties), made safe to show: one line, no control or format characters, bounded, redacted.

The provider is not trusted: a description may hold line breaks that forge log lines, ESC
sequences that drive a terminal, bidi overrides that reorder what a reader sees, or megabytes.
Every such field passes through here before any command, log or Dagster entry shows it; rich
markup is escaped where it is printed (``sharesync.sync.cli.rendering.esc``). The bounds are the
protocol's (Delta Sharing, "List Shares": displayName 255, property keys 255, values 1,000, at
most 50 properties); a comment or description (up to 65,536 there) is cut at :data:`TEXT_CHARS`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping

from sharesync.sync.core.redact import redact

NAME_CHARS = 255
TEXT_CHARS = 500
KEY_CHARS = 255
VALUE_CHARS = 1000
MAX_PROPERTIES = 50
_ELLIPSIS = "…"


def one_line(text: str | None, limit: int = TEXT_CHARS) -> str | None:
    """``text`` as one line of at most ``limit`` characters (cut ones end in ``…``); None when empty.

    Control characters (C0, C1: line breaks, ESC) and format characters (Cf: bidi overrides,
    zero-width joiners) become spaces, runs of whitespace one space."""
    if text is None:
        return None
    cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)
    flat = " ".join(redact(cleaned).split())
    if not flat:
        return None
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + _ELLIPSIS


def bounded_properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    """The first :data:`MAX_PROPERTIES` properties, keys and values made :func:`one_line`, sorted by key."""
    shown: dict[str, str] = {}
    for key, value in list((properties or {}).items())[:MAX_PROPERTIES]:
        name = one_line(str(key), KEY_CHARS)
        if name is not None:
            shown[name] = one_line(str(value), VALUE_CHARS) or ""
    return dict(sorted(shown.items()))
