"""A table as rich draws it for ``session.table``, written without rich when that is plain.

``session.table`` has rich draw a table as wide as its cells: no box, a bold header,
each column left-aligned to its widest cell, two spaces between columns, each line
as long as the table. For cells that are plain text (printable ASCII, nothing rich
reads as markup or as an emoji code), that is a few lines of padding: written here,
a listing imports no rich, which takes longer to import than the listing's call to
the API. Anything else (a cell rich would read, a title, Jupyter) returns None, and
rich draws it. ``tests/unit/cli/session/test_plain_table.py`` holds these lines to rich's,
byte for byte, to a pipe and to a terminal.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
from collections.abc import Sequence
from typing import TextIO

# rich's emoji codes (rich/_emoji_replace.py): ":name:", with an optional variant.
EMOJI_CODE = re.compile(r"(:(\S*?)(?:(?:\-)(emoji|text))?:)")
BOLD, RESET = "\x1b[1m", "\x1b[0m"


def drawn(columns: Sequence[str], rows: Sequence[Sequence[str]],
          out: TextIO | None = None) -> str | None:
    """The table's text as rich writes it to ``out`` (standard output), or None if rich
    must draw it."""
    out = out or sys.stdout
    style = styled(out)
    lines = [list(columns), *(list(row) for row in rows)]
    if (style is None or any(len(line) != len(columns) for line in lines)
            or not all(plain(cell) for line in lines for cell in line)):
        return None
    widths = [max(len(line[i]) for line in lines) for i in range(len(columns))]
    if 0 in widths:  # a column with nothing in it: rich gives it room of its own
        return None
    text = [_header(lines[0], widths) if style else _line(lines[0], widths)]
    text += [_line(line, widths) for line in lines[1:]]
    return "".join(f"{line}\n" for line in text)


def styled(out: TextIO) -> bool | None:
    """Whether rich styles what it writes to ``out`` (a terminal, as rich tells one), or
    None where rich decides in ways not followed here (Jupyter, IDLE, Windows, a dumb
    terminal, where rich narrows what it draws)."""
    if os.name == "nt" or "get_ipython" in vars(builtins) or getattr(
            sys.stdin, "__module__", "").startswith("idlelib"):
        return None
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    force = os.environ.get("FORCE_COLOR")
    if compatible in ("0", "1"):
        terminal = compatible == "1"
    elif force is not None:
        terminal = force != ""
    else:
        try:
            terminal = out.isatty()
        except ValueError:
            terminal = False
    if terminal and os.environ.get("TERM", "").lower() in ("dumb", "unknown"):
        return None
    return terminal


def plain(cell: str) -> bool:
    """Whether rich shows ``cell`` as it is written, one character a column."""
    if "[" in cell or not all(" " <= char <= "~" for char in cell):
        return False  # markup, or characters of other widths
    codes = [name.lower() for _, name, _ in EMOJI_CODE.findall(cell)]
    if not codes:
        return True
    from rich._emoji_codes import EMOJI  # only for cells with a ":code:" in them

    return not any(code in EMOJI for code in codes)


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True))


def _header(cells: Sequence[str], widths: Sequence[int]) -> str:
    # rich styles each piece apart: the text, its padding to the column's width, and the
    # space on either side of the gap between two columns.
    pieces: list[str] = []
    for n, (cell, width) in enumerate(zip(cells, widths, strict=True)):
        pieces += [cell, " " * (width - len(cell))]
        if n < len(cells) - 1:
            pieces += [" ", " "]
    return "".join(f"{BOLD}{piece}{RESET}" for piece in pieces if piece)
