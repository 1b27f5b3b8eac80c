"""Which app a command is about: ``--app``, else the ``app`` of the bodega.toml here."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

ConfigPath = Annotated[Path, typer.Option(
    "--config", "-c", help="The app's bodega.toml, or a directory holding one")]
AppOption = Annotated[str | None, typer.Option("--app", "-a", envvar="BODEGA_APP",
                                               help="App name (default: from bodega.toml)")]


def app_name(app: str | None, config: Path) -> str:
    if app:
        return app
    if config.exists():
        # pydantic: only when there is a file to read
        from bodega.deploy.config import config_file, load

        return load(config_file(config))[0].app
    raise ValueError("no app: pass --app or run where bodega.toml is (or -c PATH)")
