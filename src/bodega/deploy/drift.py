"""Whether a machine already runs what a release asks for: its config against the release's.

Both sides are read through the Machines API's own model (``MachineConfig``) and
written back as the API answers them, so what the platform fills in or rewrites
(default guest fields, ``autostop`` as a bool, fields left unset) compares equal
to what the client sent. Two things are left out of the comparison:

- the release number (``fly_release_version``): a machine whose config is the
  release's in every other way needs no restart, only its label changed in place
  (flyctl does the same: an unchanged image and config restart nothing);
- an image's tag when both sides pin the same digest: a rebuilt, unchanged image
  pushed under a new tag (``APP:v3@sha256:X`` then ``APP:v4@sha256:X``) is the
  same image.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from bodega.deploy.machine_keys import GROUP_KEY as GROUP_KEY
from bodega.deploy.machine_keys import RELEASE_KEY as RELEASE_KEY
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


def normal(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` as the API stores and answers it, less the labels a deploy rewrites."""
    try:
        wire = MachineConfig.model_validate(config).to_wire()
    except ValidationError:
        wire = dict(config)  # not a config the API would take: compare it as it is
    metadata = {k: v for k, v in (wire.get("metadata") or {}).items() if k not in LABELS}
    wire.pop("metadata", None)
    if metadata:
        wire["metadata"] = metadata
    if isinstance(wire.get("image"), str):
        wire["image"] = image_identity(wire["image"])
    return wire


def differences(have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The top-level fields of a machine's config (``have``) that the release changes."""
    a, b = normal(have), normal(want)
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def labels_to_set(have: dict[str, Any], want: dict[str, Any]) -> dict[str, str]:
    """The labels (the release number) ``want`` gives that the machine does not carry yet."""
    mine = have.get("metadata") or {}
    theirs = want.get("metadata") or {}
    return {k: str(theirs[k]) for k in sorted(LABELS) if k in theirs and mine.get(k) != theirs[k]}
