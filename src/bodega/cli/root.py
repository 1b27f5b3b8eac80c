"""The ``bodega`` command group typer runs: the command table, each command loaded when
it runs."""

from __future__ import annotations

import typer

from bodega.cli.command_table import COMMANDS, SUMMARY
from bodega.cli.lazy_commands import LazyGroup


class BodegaCommands(LazyGroup):
    entries = COMMANDS


app = typer.Typer(
    name="bodega",
    help=SUMMARY,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=BodegaCommands,
)


@app.callback()
def _root() -> None:
    # A group of its own (no command is registered with typer itself, see BodegaCommands).
    pass
