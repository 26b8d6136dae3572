"""Tables that stay readable in a narrow terminal, or piped (rich then assumes 80 columns).

Left to itself, rich cuts every column evenly once the longest words no longer fit, numbers
included: a version ``1234567890`` became ``12345…``. Here numbers (and short words such as a
mode) are never cut. When the natural widths do not fit, lists fold onto more lines and a
free-text line (a provider's description) is shortened with ``…`` first, then names fold; when
that would leave any of them narrower than :data:`MIN_FLEX` characters, optional columns are
dropped, the last first; and when even that does not fit, numbers and words wrap at their
spaces (``+12345678 ~2345678`` over two lines), a number itself is never split.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

MIN_FLEX = 12  # narrower than this, a folded name is harder to read than a dropped column
MAX_ITEM = 20
# SIMPLE_HEAD with collapse_padding and no edge padding: a space at each edge, two between columns.
_EDGES, _GAP = 2, 2


class Kind(Enum):
    NUMBER = "number"  # never cut, right-aligned
    WORD = "word"  # never cut (a mode, yes/no, a timestamp)
    NAME = "name"  # folded onto more lines, after lists and lines gave up their room
    LIST = "list"  # folded onto more lines
    LINE = "line"  # one line, shortened with an ellipsis


@dataclass(frozen=True)
class Col:
    header: str
    kind: Kind = Kind.NAME
    optional: bool = False


def fitted_table(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int, *, title: str | None = None) -> Table:
    """A rich table of ``rows`` (cells in rich markup, one per column) no wider than ``width``."""
    from rich import box
    from rich.table import Table

    cells = [max((_cell_width(row[i]) for row in rows), default=0) for i in range(len(cols))]
    natural = [max(_cell_width(c.header), n) for c, n in zip(cols, cells, strict=True)]
    words = [max([_longest_word(c.header), *(_longest_word(row[i]) for row in rows)]) for i, c in enumerate(cols)]
    # The least a column gets. A number or word: all of it — or, as the last resort, its longest
    # token (it wraps at spaces, no number is split). A name or line: MIN_FLEX (or all it needs);
    # a list: its longest item (up to MAX_ITEM), "deletionVectors" is not to be split.
    heads = [_longest_word(c.header) for c in cols]
    least = [
        nat if _fixed(c) else max(h, min(w, MAX_ITEM) if c.kind is Kind.LIST else min(n, MIN_FLEX))
        for c, n, w, h, nat in zip(cols, cells, words, heads, natural, strict=True)
    ]
    # An optional column with nothing in it (every cell "-" or "—") says nothing: left out first.
    keep = [i for i, c in enumerate(cols) if not (c.optional and all(_empty(row[i]) for row in rows))]

    def layout(squeeze: bool) -> list[int] | None:
        floor = [words[i] if squeeze and _fixed(cols[i]) else least[i] for i in keep]
        return _layout([cols[i] for i in keep], [natural[i] for i in keep], floor, width)

    widths = layout(squeeze=False)
    while widths is None and any(cols[i].optional for i in keep):
        keep.remove(next(i for i in reversed(keep) if cols[i].optional))
        widths = layout(squeeze=False)
    widths = widths or layout(squeeze=True) or [natural[i] for i in keep]
    dropped = [c.header for i, c in enumerate(cols) if i not in keep and not all(_empty(row[i]) for row in rows)]
    caption = f"({', '.join(dropped)} left out at this width; --json has every field)" if dropped else None
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for allotted, i in zip(widths, keep, strict=True):
        col = cols[i]
        whole = _fixed(col) and allotted >= natural[i]
        table.add_column(
            col.header,
            justify="right" if col.kind is Kind.NUMBER else "left",
            no_wrap=whole or col.kind is Kind.LINE,
            overflow="ellipsis" if col.kind is Kind.LINE else "fold",
            min_width=allotted if _fixed(col) else None,
            max_width=max(1, allotted),
        )
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table


def _fixed(col: Col) -> bool:
    return col.kind in (Kind.NUMBER, Kind.WORD)


def _layout(cols: Sequence[Col], natural: Sequence[int], least: Sequence[int], width: int) -> list[int] | None:
    """Each column's ``least``, then what is left: numbers and words back to whole, then names
    (shared out evenly), then the rest; None when even the least widths do not fit."""
    widths = list(least)
    left = width - _EDGES - _GAP * (len(cols) - 1) - sum(widths)
    if left < 0:
        return None
    for rank in (0, 1, 2):
        wanted = [i for i, c in enumerate(cols) if (0 if _fixed(c) else 1 if c.kind is Kind.NAME else 2) == rank]
        for k, i in enumerate(sorted(wanted, key=lambda i: natural[i])):
            share = left if rank == 0 else left // (len(wanted) - k)  # names share what numbers leave
            more = min(natural[i] - widths[i], share)
            widths[i] += more
            left -= more
    return widths


def _cell_width(cell: str) -> int:
    from rich.cells import cell_len
    from rich.text import Text

    return max((cell_len(line) for line in Text.from_markup(cell).plain.splitlines()), default=0)


def _longest_word(cell: str) -> int:
    from rich.cells import cell_len
    from rich.text import Text

    return max((cell_len(word) for word in Text.from_markup(cell).plain.replace(",", " ").split()), default=0)


def _empty(cell: str) -> bool:
    return cell.strip() in ("", "-", "—")
