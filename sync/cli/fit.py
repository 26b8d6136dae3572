"""Tables that stay readable in a narrow terminal, or piped (rich then assumes 80 columns).

Left to itself, rich cuts every column evenly once the longest words no longer fit, numbers
included: a version ``1234567890`` became ``12345…``. Here numbers (and short words such as a
mode) are never cut. When the natural widths do not fit, lists fold onto more lines and a
free-text line (a provider's description) is shortened with ``…`` first, then names fold; when
that would leave any of them narrower than :data:`MIN_FLEX` characters, optional columns are
dropped, the last first.
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
    # The least a flexible column gets: its header's longest word, and MIN_FLEX (or all it needs);
    # a list, its longest item (up to MAX_ITEM): "deletionVectors" is not to be split.
    words = [max((_longest_word(row[i]) for row in rows), default=0) for i in range(len(cols))]
    least = [
        max(max(map(len, c.header.split())), min(w, MAX_ITEM) if c.kind is Kind.LIST else min(n, MIN_FLEX))
        for c, n, w in zip(cols, cells, words, strict=True)
    ]
    # An optional column with nothing in it (every cell "-" or "—") says nothing: left out first.
    keep = [i for i, c in enumerate(cols) if not (c.optional and all(_empty(row[i]) for row in rows))]

    def layout() -> list[int] | None:
        return _layout([cols[i] for i in keep], [natural[i] for i in keep], [least[i] for i in keep], width)

    widths = layout()
    while widths is None and any(cols[i].optional for i in keep):
        keep.remove(next(i for i in reversed(keep) if cols[i].optional))
        widths = layout()
    dropped = [c.header for i, c in enumerate(cols) if i not in keep and not all(_empty(row[i]) for row in rows)]
    caption = f"({', '.join(dropped)} left out at this width; --json has every field)" if dropped else None
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for n, i in enumerate(keep):
        col = cols[i]
        allotted = widths[n] if widths is not None else natural[i]
        fixed = col.kind in (Kind.NUMBER, Kind.WORD)
        table.add_column(
            col.header,
            justify="right" if col.kind is Kind.NUMBER else "left",
            no_wrap=col.kind not in (Kind.NAME, Kind.LIST),
            overflow="ellipsis" if col.kind is Kind.LINE else "fold",
            min_width=natural[i] if fixed else None,
            max_width=None if fixed else max(1, allotted),
        )
    for row in rows:
        table.add_row(*(row[i] for i in keep))
    return table


def _layout(cols: Sequence[Col], natural: Sequence[int], least: Sequence[int], width: int) -> list[int] | None:
    """Each column's width: fixed ones their own; every flexible one its ``least``, then what is
    left to names first, narrowest first; None when even the least widths do not fit."""
    fixed = [c.kind in (Kind.NUMBER, Kind.WORD) for c in cols]
    widths = [n if f else m for n, m, f in zip(natural, least, fixed, strict=True)]
    left = width - _EDGES - _GAP * (len(cols) - 1) - sum(widths)
    if left < 0:
        return None
    flex = [i for i, f in enumerate(fixed) if not f]
    for names in (True, False):
        for i in sorted((i for i in flex if (cols[i].kind is Kind.NAME) == names), key=lambda i: natural[i]):
            more = min(natural[i] - widths[i], left)
            widths[i] += more
            left -= more
    return widths


def _cell_width(cell: str) -> int:
    from rich.cells import cell_len
    from rich.text import Text

    return max((cell_len(line) for line in Text.from_markup(cell).plain.splitlines()), default=0)


def _longest_word(cell: str) -> int:
    from rich.text import Text

    return max((len(word) for word in Text.from_markup(cell).plain.replace(",", " ").split()), default=0)


def _empty(cell: str) -> bool:
    return cell.strip() in ("", "-", "—")
