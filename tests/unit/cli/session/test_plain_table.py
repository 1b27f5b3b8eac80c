"""A table written without rich (cli/session/plain_table.py) is the table rich draws, byte for byte,
to a pipe and to a terminal; a cell rich would read otherwise is left to rich."""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bodega.cli.session import plain_table
from bodega.cli.session.api import rich_table

# Printable ASCII with what rich reads specially (brackets, colons, backslashes), a wide
# character, an accented one and a tab.
CELL = st.text(alphabet=st.sampled_from([*"abcXYZ019 -._/:[]\\", "é", "界", "\t"]),
               max_size=12) | st.sampled_from([":smile:", "12:34:56", ":100:", "[bold]x",
                                               "a\\[b", "v3", "", "  "])


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@contextlib.contextmanager
def writing_to(terminal: bool) -> Iterator[io.StringIO]:
    out = Tty() if terminal else io.StringIO()
    env = {k: v for k, v in os.environ.items()
           if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR", "COLUMNS")}
    with mock.patch.dict(os.environ, {**env, "TERM": "xterm-256color"}, clear=True), \
            contextlib.redirect_stdout(out):
        yield out


def by_rich(columns: list[str], rows: list[list[str]], terminal: bool) -> str:
    with writing_to(terminal) as out:
        rich_table(columns, rows)
    return out.getvalue()


def by_hand(columns: list[str], rows: list[list[str]], terminal: bool) -> str | None:
    with writing_to(terminal) as out:
        return plain_table.drawn(columns, rows, out)


@given(columns=st.lists(CELL, min_size=1, max_size=5), data=st.data(),
       terminal=st.booleans())
def test_a_table_written_by_hand_is_rich_s(columns: list[str], data: st.DataObject,
                                           terminal: bool) -> None:
    rows = data.draw(st.lists(st.lists(CELL, min_size=len(columns), max_size=len(columns)),
                              max_size=4))
    written = by_hand(columns, rows, terminal)
    if written is not None:
        assert written == by_rich(columns, rows, terminal)


@pytest.mark.parametrize("terminal", [False, True], ids=["pipe", "terminal"])
def test_a_listing_of_plain_cells_is_written_by_hand(terminal: bool) -> None:
    columns = ["ID", "NAME", "STATE", "UPDATED"]
    rows = [["130527156f5164", "wandering-sea-8606", "started", "2026-11-25T17:45:58.080391Z"],
            ["ea4d0e0db6b933", "calm", "stopped", ""]]
    written = by_hand(columns, rows, terminal)
    assert written is not None
    assert written == by_rich(columns, rows, terminal)


@pytest.mark.parametrize("cell", [":smile:", "[bold]x", "名前", "tab\there"])
def test_a_cell_rich_reads_otherwise_is_left_to_rich(cell: str) -> None:
    assert by_hand(["NAME"], [[cell]], terminal=False) is None
