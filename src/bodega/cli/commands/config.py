"""``bodega config validate`` and ``bodega config show``: a bodega.toml (or fly.toml) as a
deploy would read it, checked offline (``deploy/core/config_check.py``)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from bodega.cli.session.app_choice import DEFAULT_CONFIG, ConfigPath
from bodega.cli.session.errors import fail
from bodega.deploy.core.config import Note
from bodega.deploy.core.config_check import check

config = typer.Typer(help="Check a bodega.toml or fly.toml, and show it as bodega reads it.",
                     no_args_is_help=True)

Strict = Annotated[bool, typer.Option(
    "--strict", help="An unknown key is an error, not a warning")]
AppFlag = Annotated[str | None, typer.Option(
    "--app", "-a", help="App name, for a file that names none (or to name another)")]
ImageFlag = Annotated[str | None, typer.Option(
    "--image", help="The image a deploy would be given (--image), for a file that builds none")]


def _item(note: Note) -> dict[str, str | int]:
    return {"key": note.key, "line": note.line, "message": note.message}


@config.command("validate")
def validate(config_path: ConfigPath = DEFAULT_CONFIG, strict: Strict = False,
             app: AppFlag = None, image: ImageFlag = None,
             json_out: Annotated[bool, typer.Option(
                 "--json", help='{"ok", "warnings", "errors"}, each item {key, line, message}')]
             = False) -> None:
    """Check the config as a deploy would read it: exit 0 when a deploy would go ahead,
    1 with one line per error otherwise; keys bodega leaves are warnings."""
    checked = check(config_path, strict=strict, app=app, image=image)
    if json_out:
        typer.echo(json.dumps({"ok": checked.ok,
                               "warnings": [_item(n) for n in checked.warnings],
                               "errors": [_item(n) for n in checked.errors]}, indent=2))
    else:
        for note in checked.warnings:
            typer.secho(f"Warning: {note}", fg=typer.colors.YELLOW, err=True)
        for note in checked.errors:
            typer.secho(f"Error: {note}", fg=typer.colors.RED, err=True)
        if checked.ok:
            typer.echo(f"{checked.file} is valid: a deploy would go ahead"
                       + (f" ({len(checked.warnings)} warnings)" if checked.warnings else ""))
    if not checked.ok:
        raise typer.Exit(1)


@config.command("show")
def show(config_path: ConfigPath = DEFAULT_CONFIG, app: AppFlag = None,
         image: ImageFlag = None,
         machines: Annotated[bool, typer.Option(
             "--machines", help="Each process group's machine config instead")] = False) -> None:
    """Print the config as bodega acts on it (older shapes rewritten, keys it leaves taken
    out), as JSON; --machines prints the machine config each process group gets."""
    checked = check(config_path, app=app, image=image)
    if checked.config is None or not checked.ok:
        fail(str((checked.errors or [Note(file=str(config_path), line=0, key="",
                                            message="not valid")])[0]))
    if machines:
        shown = {group: spec.model_dump(mode="json", exclude_none=True)
                 for group, spec in checked.machines.items()}
        typer.echo(json.dumps(shown, indent=2))
    else:
        assert checked.config is not None
        typer.echo(json.dumps(checked.config.model_dump(mode="json", by_alias=True,
                                                        exclude_none=True), indent=2))
