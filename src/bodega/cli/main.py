"""``bodega``: one command for the daemons, the local cluster and the API.

Commands are listed in ``cli/command_table.py`` by name, help line and module; a
command's module is imported only when that command runs (``lazy_commands``),
so a quick command does not pay for the imports of every other one. The list
itself (``bodega --help``, or ``bodega`` alone) is drawn from that table without
loading typer at all (``root_help``); anything else runs typer's group
(``cli/root.py``), whose names load here on first use (PEP 562).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from bodega.cli.command_table import COMMANDS, SUMMARY

if TYPE_CHECKING:
    from bodega.cli.root import BodegaCommands, app

__all__ = ["COMMANDS", "BodegaCommands", "app", "run"]


def run() -> None:
    asked = sys.argv[1:]
    if asked in ([], ["--help"]):
        from bodega.cli import root_help

        program = root_help.program_name()
        if not root_help.completing(program):
            try:
                root_help.show(SUMMARY, COMMANDS, program)
                if asked:
                    print()  # typer's page ends with click's help text, empty, echoed
                    sys.stdout.flush()
            except BrokenPipeError:  # `bodega --help | head`: quiet, as typer is
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                sys.exit(1)
            sys.exit(0 if asked else 2)  # as typer: no command at all is a usage error
    from bodega.cli.root import app

    app()


def __getattr__(name: str) -> Any:
    if name in ("app", "BodegaCommands"):
        from bodega.cli import root

        return getattr(root, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
