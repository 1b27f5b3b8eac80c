"""The build step of ``bodega deploy``: buildah, then a push to the cluster's registry.

What to build is ``bodega.deploy.core.image_build``'s decision; this shell asks the
cluster for the app's releases (for the tag), runs the same buildah commands as
``bodega build`` and returns the reference the deploy then runs with the oci
driver: the tag with the pushed digest, so the machines run what was built.
"""

from __future__ import annotations

from pathlib import Path

from bodega.cli.commands.build import build_and_push, push_target
from bodega.cli.session.api import call_target, console
from bodega.cli.session.core.target import Target
from bodega.deploy.core.config import AppConfig
from bodega.deploy.core.image_build import image_build
from bodega.model.errors import NotFound
from bodega.wire.public.machines_client import MachinesClient


async def _versions(client: MachinesClient, app: str) -> list[int]:
    try:
        return [r.version for r in await client.releases(app)]
    except NotFound:
        return []  # a first deploy: the app is created by the deploy itself


def built_image(config: AppConfig, config_path: Path, image: str | None, registry: str | None,
                cluster: Target, quiet: bool) -> str | None:
    """The reference of the image built for this deploy, or None when it builds nothing.

    It is pushed to the registry of the cluster deployed to (``push_target``): over TLS
    checked against the cluster's CA, with the deploy's token."""
    config_dir = config_path.resolve().parent
    versions = call_target(cluster, lambda c: _versions(c, config.app))
    planned = image_build(config, config_dir, Path.is_file, versions, image)
    if planned is None:
        return None
    push = push_target(registry, cluster)
    reference = planned.reference(push.registry)
    if not quiet:
        console.print(f"[bold]build[/bold]: {planned.dockerfile.name} -> {reference}")
    digest = build_and_push(planned.context, reference, planned.dockerfile, push,
                            planned.options())
    # Pinned: a deploy runs what it built even if another push reuses the tag meanwhile.
    return f"{reference}@{digest}"
