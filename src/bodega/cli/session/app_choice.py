"""Which app a command is about: ``--app``, else the ``app`` of the bodega.toml here.

Every command that works on one app takes ``-a/--app`` and ``-c/--config`` and asks
``app_name``, as flyctl reads fly.toml: run where an app's bodega.toml is, and the
app need not be named. With neither, the command stops with one line saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

DEFAULT_CONFIG = Path("bodega.toml")

ConfigPath = Annotated[Path, typer.Option(
    "--config", "-c", help="The app's bodega.toml, or a directory holding one")]
AppOption = Annotated[str | None, typer.Option("--app", "-a", envvar="BODEGA_APP",
                                               help="App name (default: from bodega.toml)")]


def app_name(app: str | None, config: Path) -> str:
    if app:
        return app
    if config.exists() or config.with_name("fly.toml").exists():
        # pydantic: only when there is a file to read
        from bodega.deploy.core.config import config_file, load

        return load(config_file(config))[0].app
    raise ValueError(f"no app: pass -a APP, or run where a bodega.toml names one, or give its "
                     f"path with -c (there is no {config})")
