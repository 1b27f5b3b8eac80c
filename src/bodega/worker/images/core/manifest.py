"""OCI and Docker v2 manifests, indexes and image configs as typed models; pure.

Only the fields bodega reads are declared; the rest of a registry's document
is ignored (``extra="ignore"``) because images carry annotations and history
bodega has no use for.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
ACCEPT = ", ".join((*MANIFEST_TYPES, *INDEX_TYPES))
PLATFORM = ("linux", "amd64")


class BadImage(ValueError):
    """A registry document bodega cannot use; the message says why."""


class _Doc(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)


class Platform(_Doc):
    os: str = ""
    architecture: str = ""


class Descriptor(_Doc):
    media_type: str = Field("", alias="mediaType")
    digest: str
    size: int = Field(ge=0)
    platform: Platform | None = None


class Manifest(_Doc):
    media_type: str = Field("", alias="mediaType")
    config: Descriptor
    layers: tuple[Descriptor, ...] = ()


class Index(_Doc):
    media_type: str = Field("", alias="mediaType")
    manifests: tuple[Descriptor, ...] = ()


class RunConfig(_Doc):
    entrypoint: list[str] | None = Field(None, alias="Entrypoint")
    cmd: list[str] | None = Field(None, alias="Cmd")
    env: list[str] | None = Field(None, alias="Env")
    working_dir: str | None = Field(None, alias="WorkingDir")
    user: str | None = Field(None, alias="User")


class ImageConfig(_Doc):
    architecture: str = ""
    os: str = ""
    config: RunConfig = Field(default_factory=RunConfig)


def _load(data: bytes) -> dict[str, object]:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise BadImage(f"not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise BadImage("not a JSON object")
    return doc


def is_index(data: bytes, content_type: str = "") -> bool:
    doc = _load(data)
    kind = str(doc.get("mediaType") or content_type.split(";")[0].strip())
    return kind in INDEX_TYPES or ("manifests" in doc and "layers" not in doc)


def parse_manifest(data: bytes) -> Manifest:
    try:
        return Manifest.model_validate(_load(data))
    except ValidationError as exc:
        raise BadImage(f"bad manifest: {exc.errors()[0]['msg']}") from exc


def parse_config(data: bytes) -> ImageConfig:
    try:
        return ImageConfig.model_validate(_load(data))
    except ValidationError as exc:
        raise BadImage(f"bad image config: {exc.errors()[0]['msg']}") from exc


def pick_platform(data: bytes, platform: tuple[str, str] = PLATFORM) -> Descriptor:
    """The manifest an index lists for ``platform`` (linux/amd64)."""
    try:
        index = Index.model_validate(_load(data))
    except ValidationError as exc:
        raise BadImage(f"bad index: {exc.errors()[0]['msg']}") from exc
    for entry in index.manifests:
        if entry.platform and (entry.platform.os, entry.platform.architecture) == platform:
            return entry
    raise BadImage(f"the image has no {platform[0]}/{platform[1]} manifest")
