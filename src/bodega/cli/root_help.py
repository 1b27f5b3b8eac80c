"""``bodega --help`` (and ``bodega`` alone): the list of commands, drawn without typer.

The page is what typer draws for the root group (``typer.rich_utils``): a usage
line, the app's help, an Options panel, a Commands panel. Typer's drawing
module imports all of rich (markdown, tracebacks, syntax highlighting) and
typer itself, which took longer than the rest of ``bodega --help``; this draws
the same page with rich's console, panels and tables alone, from the command
table in ``cli/command_table.py``. ``tests/integration/cli/test_root_help.py`` holds it
to typer's page, byte for byte, at several widths, colour or not.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Literal

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, Group
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

from bodega.cli.command_table import Lazy

# typer.rich_utils' styles and words, as it draws a group's help.
THEME = Theme({"option": "bold cyan", "switch": "bold green", "negative_option": "bold magenta",
               "negative_switch": "bold red", "types": "bold yellow", "types_sep": "dim",
               "usage": "yellow"})
HELP_OPTION = ("--help", "", "Show this message and exit.")  # a flag shows no type (lazy_commands)


class OptionHighlighter(RegexHighlighter):
    highlights = [
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class NegativeOptionHighlighter(RegexHighlighter):
    highlights = [
        r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
    ]


class TypesHighlighter(RegexHighlighter):
    highlights = [
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


def program_name() -> str:
    """What the usage line calls the program, as click names it: ``bodega`` run as a
    script, ``python -m bodega`` run as a module."""
    main = sys.modules["__main__"]
    path = sys.argv[0]
    package = getattr(main, "__package__", None)
    if package in (None, ""):
        return os.path.basename(path)
    name = os.path.splitext(os.path.basename(path))[0]
    module = package if name == "__main__" else f"{package}.{name}"
    return f"python -m {module.lstrip('.')}"


def completing(program: str) -> bool:
    """Whether a shell asks for completions (click's variable): typer answers that."""
    return bool(os.environ.get(f"_{program}_COMPLETE".replace("-", "_").upper()))


def console() -> Console:
    width = os.environ.get("TERMINAL_WIDTH")
    force: bool | None = True if (os.environ.get("GITHUB_ACTIONS") or os.environ.get("FORCE_COLOR")
                                  or os.environ.get("PY_COLORS")) else None
    if os.environ.get("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    system: Literal["auto"] = "auto"
    return Console(theme=THEME, highlighter=OptionHighlighter(), color_system=system,
                   force_terminal=force, width=int(width) if width else None)


def show(summary: str, commands: Sequence[Lazy], program: str) -> None:
    """Print the root group's help page: ``summary`` is the app's help, ``commands`` its
    commands with their help lines."""
    out = console()
    highlight = OptionHighlighter()
    out.print(Padding(highlight(f"Usage: {program} [OPTIONS] COMMAND [ARGS]..."), 1),
              style="bold")
    out.print(Padding(Align(Group(highlight(Text.from_markup(summary, style=""))), pad=False),
                      (0, 1, 1, 1)))

    options = Table(highlight=True, show_header=False, expand=True, box=None, show_lines=False,
                    leading=0, border_style=None, row_styles=None, pad_edge=False,
                    padding=(0, 1))
    name, kind, what = HELP_OPTION
    options.add_row(highlight(name), highlight(""), NegativeOptionHighlighter()(""),
                    NegativeOptionHighlighter()(""),
                    TypesHighlighter()(Text(kind, style="bold yellow", overflow="fold")),
                    Columns([highlight(Text.from_markup(what, style=""))]))
    out.print(Panel(options, border_style="dim", title="Options", title_align="left"))

    table = Table(highlight=False, show_header=False, expand=True, box=None, show_lines=False,
                  leading=0, border_style=None, row_styles=None, pad_edge=False, padding=(0, 1))
    table.add_column(style="bold cyan", no_wrap=True, width=max(len(c.name) for c in commands))
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for command in commands:
        table.add_row(Text(command.name),
                      highlight(Text.from_markup(command.help.strip(), style="")))
    out.print(Panel(table, border_style="dim", title="Commands", title_align="left"))

