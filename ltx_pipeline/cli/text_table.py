"""Box-drawn text tables for ``status``, built as plain strings.

Rich's ``Table`` measured and laid out every cell through its renderable machinery, which made
``status`` on a workspace of 20 runs spend more time drawing than everything else (#16). This
draws the same shape (rich's heavy-head box, a title line above, cells padded by one space) with
string operations: each column takes its natural width, the widest columns give way one character
at a time until the table fits the console, and a cell too long for its column folds onto more
lines inside it, never cut. Cell text is printed as given: no markup, no highlighting.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from rich.cells import cell_len

__all__ = ["table_lines"]

_MIN_COLUMN = 4  # a column is never squeezed below this many cells (or its header's width, if smaller)


def table_lines(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[object]], width: int) -> list[str]:
    """The table's lines, at most ``width`` cells wide unless its columns cannot shrink that far."""
    cells = [[_text(value) for value in row] for row in rows]
    widths = [max([cell_len(header)] + [_longest(row[i]) for row in cells]) for i, header in enumerate(columns)]
    floors = [min(_MIN_COLUMN, w) for w in widths]
    overflow = sum(widths) + 3 * len(widths) + 1 - width
    while overflow > 0:
        widest = max(range(len(widths)), key=lambda i: (widths[i] - floors[i], widths[i]))
        if widths[widest] <= floors[widest]:
            break  # every column is at its floor: the table stays wider than the console
        widths[widest] -= 1
        overflow -= 1
    lines = [title] if title else []
    lines.append("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓")
    lines += _row(list(columns), widths, "┃")
    lines.append("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩")
    for row in cells:
        lines += _row(row, widths, "│")
    lines.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    return lines


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _longest(text: str) -> int:
    return max((cell_len(line) for line in text.splitlines()), default=0)


def _fold(text: str, width: int) -> list[str]:
    """The cell's lines at ``width``: wrapped at spaces, long words broken, nothing dropped."""
    folded: list[str] = []
    for line in text.splitlines() or [""]:
        if cell_len(line) <= width:
            folded.append(line)
        else:
            folded += textwrap.wrap(line, width=width, break_long_words=True, break_on_hyphens=False) or [""]
    return folded


def _row(values: list[str], widths: list[int], bar: str) -> list[str]:
    folded = [_fold(value, width) for value, width in zip(values, widths, strict=True)]
    height = max(len(f) for f in folded)
    lines = []
    for index in range(height):
        parts = []
        for cell, width in zip(folded, widths, strict=True):
            text = cell[index] if index < len(cell) else ""
            parts.append(" " + text + " " * max(0, width - cell_len(text)) + " ")
        lines.append(bar + bar.join(parts) + bar)
    return lines
