"""What one image registry of the cluster lacks of another's: pure.

A push goes to every live registry (``image_registries.py``), so a registry
whose host was down during a push, or that of a server host joining later,
lacks what was pushed meanwhile. A server host's supervisor catches its own
registry up from the others (``cluster/registry_sync.py``): content is addressed
by digest, so a copy is the same bytes under the same name, idempotent, and
never replaces anything. Tags are the one mutable name: a tag the registry
lacks is set, one it holds is kept even if a peer's names another manifest (no
order between the two pushes is known, and a deploy runs the digest it pinned,
which is copied either way).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Copy:
    """Copy manifest ``digest`` (with everything it names) unless the registry holds it
    (``manifest``), then name it ``tag`` there unless the registry has that tag."""

    tag: str
    digest: str
    manifest: bool
    retag: bool


def copies(peer: Mapping[str, str], own: Mapping[str, str], held: set[str]) -> list[Copy]:
    """What to copy of one repository: ``peer`` and ``own`` map each tag to the manifest
    digest it names in the peer's and in this registry; ``held``: the peer's digests this
    registry holds already (tagged or not)."""
    wanted = []
    for tag, digest in sorted(peer.items()):
        manifest = digest not in held and own.get(tag) != digest
        retag = tag not in own
        if manifest or retag:
            wanted.append(Copy(tag, digest, manifest, retag))
    return wanted


@dataclass(frozen=True)
class Named:
    """What a manifest names: the manifests of an index (each to copy first, with what
    it names) and the blobs of an image manifest (its config and layers)."""

    manifests: tuple[str, ...]
    blobs: tuple[str, ...]


def named_by(body: bytes) -> Named:
    """What manifest ``body`` names; ValueError if it is not a manifest."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"not a manifest: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a manifest: not a JSON object")
    children = tuple(str(m["digest"]) for m in doc.get("manifests") or [])
    config = doc.get("config") or {}
    blobs = tuple(str(d["digest"]) for d in [config, *(doc.get("layers") or [])]
                  if isinstance(d, dict) and d.get("digest"))
    return Named(children, blobs)
