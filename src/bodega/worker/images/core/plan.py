"""The pull as a state machine whose state is the content-addressed store; pure.

A pull never writes a file that is not verified: a blob lands under its
digest only after its bytes hashed to that digest, a base is renamed into
place only once every layer is unpacked. So what the store holds *is* the
pull's durable progress, and a worker killed at any instant resumes by
looking again: ``next_step`` reads a snapshot of the store (``PullView``) and
says what to do next. A blob found corrupt or truncated is simply not in
``have`` and is fetched again.
"""

from __future__ import annotations

from dataclasses import dataclass

from bodega.worker.images.core.manifest import Descriptor, Manifest


@dataclass(frozen=True)
class PullView:
    manifest_digest: str | None  # the reference resolved (or given by digest); None: not yet
    manifest: Manifest | None  # the manifest, when its blob is present and verified
    have: frozenset[str]  # digests of blobs present and verified
    unpacked: bool  # the base for manifest_digest is complete


@dataclass(frozen=True)
class Resolve:
    """Ask the registry which manifest the reference names (an index picks linux/amd64)."""


@dataclass(frozen=True)
class FetchManifest:
    digest: str


@dataclass(frozen=True)
class FetchBlob:
    descriptor: Descriptor


@dataclass(frozen=True)
class Unpack:
    manifest_digest: str
    manifest: Manifest


@dataclass(frozen=True)
class Done:
    manifest_digest: str


PullStep = Resolve | FetchManifest | FetchBlob | Unpack | Done


def next_step(view: PullView) -> PullStep:
    if view.manifest_digest is None:
        return Resolve()
    if view.unpacked:
        return Done(view.manifest_digest)
    if view.manifest is None:
        return FetchManifest(view.manifest_digest)
    for descriptor in (view.manifest.config, *view.manifest.layers):
        if descriptor.digest not in view.have:
            return FetchBlob(descriptor)
    return Unpack(view.manifest_digest, view.manifest)


def needed_blobs(manifest: Manifest) -> list[str]:
    return [manifest.config.digest, *(layer.digest for layer in manifest.layers)]
