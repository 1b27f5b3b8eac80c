"""Image references, parsed the way Docker reads them; pure.

``127.0.0.1:5000/team/app:v1``, ``registry.example/app@sha256:...``. A
reference names an OCI image for bodega only when its first component is a
registry host (it holds a ``.`` or a ``:``, or is ``localhost``): that is how
Docker tells ``host/app`` from a Docker Hub ``user/app``. Anything else in
``config.image`` (``process``, ``nginx``) is a label for a host command, as
before images existed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bodega.model.machine import names_registry

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_REPO_RE = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class BadReference(ValueError):
    """Not a valid image reference; the message says why."""


@dataclass(frozen=True)
class ImageReference:
    registry: str  # host[:port]
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def version(self) -> str:
        """What to ask the registry's manifests endpoint for: the digest, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        text = f"{self.registry}/{self.repository}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_reference(image: str, default_registry: str | None = None) -> ImageReference:
    """Split ``image``; a reference without a registry host uses ``default_registry``."""
    text = image.strip()
    if not text:
        raise BadReference("empty image reference")
    if names_registry(text):
        registry, _, rest = text.partition("/")
    elif default_registry:
        registry, rest = default_registry, text
    else:
        raise BadReference(f"image {image!r} names no registry host (e.g. host:5000/app)")
    digest: str | None = None
    if "@" in rest:
        rest, _, digest = rest.partition("@")
        if not _DIGEST_RE.match(digest):
            raise BadReference(f"image {image!r}: digest must be sha256:<64 hex>")
    tag: str | None = None
    name, colon, maybe_tag = rest.rpartition(":")
    if colon and "/" not in maybe_tag:
        rest, tag = name, maybe_tag
        if not _TAG_RE.match(tag):
            raise BadReference(f"image {image!r}: bad tag {tag!r}")
    if not _REPO_RE.match(rest):
        raise BadReference(f"image {image!r}: bad repository name {rest!r}")
    if tag is None and digest is None:
        tag = "latest"
    return ImageReference(registry=registry, repository=rest, tag=tag, digest=digest)
