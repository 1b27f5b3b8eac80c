"""Whether a deploy builds its image from a Dockerfile first, and what it tags it.

A pure decision, as ``fly deploy --local-only`` takes it: ``[build] dockerfile``
names a Dockerfile (relative to bodega.toml); without it, a ``Dockerfile`` next
to bodega.toml is built when no ``[build] image`` is set. ``--image`` wins over
both. ``[build.args]``, ``build-target`` and ``ignorefile`` reach buildah. The
image is tagged with the release version the deploy is about to
record, so ``bodega releases`` and the registry name the same thing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.config import AppConfig

DEFAULT_DOCKERFILE = "Dockerfile"


class ImageBuild(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    context: Path  # the directory bodega.toml is in
    dockerfile: Path
    tag: str  # name:tag, without a registry host
    args: dict[str, str] = {}  # [build.args]
    target: str | None = None  # [build] build-target: the Dockerfile's stage
    ignorefile: Path | None = None  # [build] ignorefile, instead of .dockerignore

    def reference(self, registry: str) -> str:
        return f"{registry}/{self.tag}"

    def options(self) -> list[str]:
        """buildah bud's flags for the args, the target and the ignore file."""
        flags = [f"--build-arg={name}={value}" for name, value in sorted(self.args.items())]
        if self.target:
            flags.append(f"--target={self.target}")
        if self.ignorefile is not None:
            flags.append(f"--ignorefile={self.ignorefile}")
        return flags


def image_build(config: AppConfig, config_dir: Path, exists: Callable[[Path], bool],
                versions: list[int], image_override: str | None = None) -> ImageBuild | None:
    """The build a deploy of ``config`` starts with, or None when it deploys as is.

    ``versions``: the app's release versions so far; ``exists`` says whether a file is there."""
    if image_override:
        return None
    if config.build.dockerfile:
        dockerfile = config_dir / config.build.dockerfile
        if not exists(dockerfile):
            raise ValueError(f"[build] dockerfile: {dockerfile} does not exist")
    elif not config.build.image and exists(config_dir / DEFAULT_DOCKERFILE):
        dockerfile = config_dir / DEFAULT_DOCKERFILE
    else:
        return None
    ignorefile = config_dir / config.build.ignorefile if config.build.ignorefile else None
    if ignorefile is not None and not exists(ignorefile):
        raise ValueError(f"[build] ignorefile: {ignorefile} does not exist")
    return ImageBuild(context=config_dir, dockerfile=dockerfile,
                      tag=f"{config.app}:v{1 + max(versions, default=0)}",
                      args=config.build.args, target=config.build.build_target,
                      ignorefile=ignorefile)
