"""Whether a deploy would go ahead with a config, and all that was found: ``bodega config
validate``'s answer, as ``fly config validate`` gives it.

A deploy reads the file (``config.load``), then makes each process group's machine
config (``machine_spec``); a problem in either stops it. This does both, offline: the
image a deploy would build (a Dockerfile named or beside the file) stands in as
``IMAGE_TO_BUILD``, so a group is checked as the image app it will be.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.config import (
    AppConfig,
    ConfigError,
    Note,
    config_file,
    load,
    unserved_statics,
)
from bodega.deploy.core.fly_files import LocalFileError
from bodega.deploy.core.image_build import image_build
from bodega.deploy.core.machine_spec import machine_config
from bodega.deploy.core.toml_errors import line_of
from bodega.model.machine_config import MachineConfig

IMAGE_TO_BUILD = "registry.invalid/built-by-deploy:latest"


class Checked(BaseModel):
    """A config as a deploy would take it: ``ok`` when it would go ahead."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    file: str  # the file read: -c's, or the fly.toml found for a bodega.toml not there
    ok: bool
    warnings: list[Note]
    errors: list[Note]
    config: AppConfig | None = None
    machines: dict[str, MachineConfig] = {}  # by process group


def check(path: Path, *, strict: bool = False, app: str | None = None,
          image: str | None = None) -> Checked:
    """``path`` (a file, or a directory with one) checked as ``bodega deploy -c path`` would
    read it; ``app`` names an app the file does not, ``image`` one it does not build."""
    try:
        path = config_file(path)
        config, warnings = load(path, strict=strict, app=app)
    except ConfigError as exc:
        return Checked(file=str(path), ok=False, warnings=exc.warnings, errors=exc.errors)
    try:
        built = image_build(config, path.resolve().parent, Path.is_file, [], image)
    except ValueError as exc:  # a [build] dockerfile that is not there
        return Checked(file=str(path), ok=False, warnings=warnings, errors=[
            Note(file=str(path), line=0, key="build.dockerfile", message=str(exc))])
    image = image or (IMAGE_TO_BUILD if built is not None else None)
    if image:
        config = config.model_copy(update={"build": config.build.model_copy(
            update={"image": image})})
    warnings += unserved_statics(config, path)
    errors: list[Note] = []
    machines: dict[str, MachineConfig] = {}
    for group in config.groups:
        try:
            machines[group] = machine_config(config, group, 1, path.resolve().parent)
        except LocalFileError as exc:  # one line per file, whichever groups it is for
            key = f"files.{exc.index}.local_path"
            if all(e.key != key for e in errors):
                errors.append(Note(file=str(path), line=_line(path, key), key=key,
                                   message=str(exc)))
        except ValueError as exc:
            errors.append(Note(file=str(path), line=0, key=f"processes.{group}",
                               message=str(exc)))
    return Checked(file=str(path), ok=not errors, warnings=warnings, errors=errors, config=config,
                   machines=machines)


def _line(path: Path, key: str) -> int:
    try:
        return line_of(path.read_text(), key.split("."))
    except OSError:
        return 0
