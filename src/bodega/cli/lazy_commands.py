"""A command group that imports a command's module only when that command runs.

Its commands are ``Lazy`` entries (``cli/command_table.py``): a name, a help line and
where the command lives. ``bodega apps list`` imports ``bodega.cli.commands.apps`` and what
it needs, never numpy (``sim``), starlette and uvicorn (the daemons) or the
deploy models. A test holds every help line to its command's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_group_from_info
from typer.models import CommandInfo, TyperInfo

from bodega.cli.command_table import Lazy


class LazyGroup(TyperGroup):
    """Subclass it with ``entries`` set; pass the subclass as ``typer.Typer(cls=...)``."""

    entries: Sequence[Lazy] = ()

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # Stand-ins carry the name and help line for listings and "did you mean";
        # resolve_command swaps in the real command when one is run.
        for entry in self.entries:
            self.commands[entry.name] = TyperCommand(name=entry.name, help=entry.help)
        self._loaded: dict[str, object] = {}  # a Typer app or a command, handed to click

    # Typed loosely: typer builds on its own copy of click, whose classes it does not export.
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        bare_flags(self, ctx)  # before `bodega --help` is answered
        return list(super().parse_args(ctx, args))

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None:
            command = self.load(name)
            bare_flags(command, ctx)
        return name, command, rest

    def load(self, name: str) -> Any:
        """The real command ``name``, its module imported now."""
        if name not in self._loaded:
            entry = next(e for e in self.entries if e.name == name)
            self._loaded[name] = self._build(entry)
        return self._loaded[name]

    def _build(self, entry: Lazy) -> Any:
        target = entry.load()
        if isinstance(target, typer.Typer):
            group = get_group_from_info(
                TyperInfo(target, name=entry.name), pretty_exceptions_short=True,
                rich_markup_mode=self.rich_markup_mode, suggest_commands=self.suggest_commands)
            return group
        return get_command_from_info(
            CommandInfo(name=entry.name, callback=target, help=entry.help),
            pretty_exceptions_short=True, rich_markup_mode=self.rich_markup_mode)


def bare_flags(command: Any, ctx: Any) -> None:
    """Show flags without a value in ``--help``, in ``command`` and every command under it.

    typer's help shows each option's type after its name (``--app <str>``), a flag's too
    (``--json <bool>``, ``--help <bool>``), as if it took a value. A flag (and a counter)
    gets an empty metavar, which typer shows instead of the type; an option that takes a
    value keeps its type. ``--help`` is made on first asking and kept (``ctx`` says its
    names), so it is asked for here and changed once.
    """
    for param in [*command.params, command.get_help_option(ctx)]:
        if param is not None and param.metavar is None and (
                getattr(param, "is_flag", False) or getattr(param, "count", False)):
            param.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        bare_flags(sub, ctx)
