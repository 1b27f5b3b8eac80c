"""Whether a machine already runs what a release asks for: its config against the release's.

Both sides are the Machines API's own model (``MachineConfig``), compared as the
API answers them, so what the platform fills in or rewrites
(default guest fields, ``autostop`` as a bool, fields left unset) compares equal
to what the client sent. Three things are left out of the comparison:

- the release number (``fly_release_version``): a machine whose config is the
  release's in every other way needs no restart, only its label changed in place
  (flyctl does the same: an unchanged image and config restart nothing);
- an image's tag when both sides pin the same digest: a rebuilt, unchanged image
  pushed under a new tag (``APP:v3@sha256:X`` then ``APP:v4@sha256:X``) is the
  same image;
- which volume a mount names (by id on the machine, by name in the release) and its
  size: the same volume, grown or not, is the same mount.

Pure: no I/O.
"""

from __future__ import annotations

from bodega.deploy.core.machine_keys import GROUP_KEY as GROUP_KEY
from bodega.deploy.core.machine_keys import RELEASE_KEY as RELEASE_KEY
from bodega.model.machine_config import MachineConfig

# Metadata a deploy rewrites in place: it never makes a machine out of date.
LABELS = frozenset({RELEASE_KEY})


def image_identity(image: str) -> str:
    """The image as a machine runs it: repository and digest when pinned, else the whole ref."""
    name, at, digest = image.partition("@")
    if not at:
        return image
    repository, last = name.rsplit("/", 1) if "/" in name else ("", name)
    last = last.split(":", 1)[0]
    return f"{repository}/{last}@{digest}" if repository else f"{last}@{digest}"


def normal(config: MachineConfig) -> MachineConfig:
    """``config`` less the labels a deploy rewrites, its image by identity, its mounts by
    the volume's name and path (a release names the volume, a machine mounts one by id,
    of the size it has grown to)."""
    metadata = {k: v for k, v in (config.metadata or {}).items() if k not in LABELS}
    mounts = [m.model_copy(update={"volume": None, "size_gb": None}) if m.name else m
              for m in config.mounts or []]
    return config.model_copy(update={"metadata": metadata or None, "mounts": mounts or None,
                                     "image": image_identity(config.image)})


def differences(have: MachineConfig, want: MachineConfig) -> list[str]:
    """The top-level fields of a machine's config (``have``) that the release changes, as
    the API answers both."""
    a, b = normal(have).to_wire(), normal(want).to_wire()
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def labels_to_set(have: MachineConfig, want: MachineConfig) -> dict[str, str]:
    """The labels (the release number) ``want`` gives that the machine does not carry yet."""
    mine = have.metadata or {}
    theirs = want.metadata or {}
    return {k: theirs[k] for k in sorted(LABELS) if k in theirs and mine.get(k) != theirs[k]}
