"""A pull fetches from any of the cluster's registries that answers (worker/images/sources.py):
the named one lost, the image comes from another, and the rest of the pull asks that one."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from bodega.model.image_registries import Advertised
from bodega.worker.images.core.reference import ImageReference
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient, RegistryError, RegistryTrust
from bodega.worker.images.sources import RegistrySources
from bodega.worker.images.store import ImageStore

LOST, PEER, ELSEWHERE = "10.0.0.1:5000", "10.0.0.2:5000", "registry.example"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


def layer() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        body = b"hello\n"
        info = tarfile.TarInfo("hello.txt")
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
    return gzip.compress(raw.getvalue(), mtime=0)


def image() -> tuple[bytes, dict[str, bytes]]:
    """A manifest and its blobs by digest."""
    tar = layer()
    config = json.dumps({"architecture": "amd64", "os": "linux",
                         "config": {"Cmd": ["/bin/sh"]},
                         "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": digest_of(config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                    "digest": digest_of(tar), "size": len(tar)}]}).encode()
    return manifest, {digest_of(config): config, digest_of(tar): tar}


class Registries(RegistryClient):
    """Registries in memory, by host:port; a lost one refuses every call, as a host whose
    registry is down refuses the connection."""

    def __init__(self, holding: dict[str, bool]) -> None:
        super().__init__()
        self.manifest_body, self.blobs = image()
        self.holding = holding  # registry -> it holds the image (False: it is lost)
        self.asked: list[tuple[str, str]] = []

    def _answer(self, ref: ImageReference, what: str) -> None:
        self.asked.append((ref.registry, what))
        if not self.holding.get(ref.registry, False):
            raise RegistryError(f"{ref}: Cannot connect to host {ref.registry}")

    async def manifest(self, ref: ImageReference, version: str) -> tuple[bytes, str]:
        self._answer(ref, "manifest")
        return self.manifest_body, MANIFEST_TYPE

    async def blob(self, ref: ImageReference, digest: str, dest: Path) -> str:
        self._answer(ref, "blob")
        dest.write_bytes(self.blobs[digest])
        return digest


def pull(tmp_path: Path, client: Registries, sources: RegistrySources | None,
         image_ref: str) -> str:
    puller = Puller(ImageStore(tmp_path / "images"), client, sources=sources)
    return asyncio.run(puller.pull(image_ref))


def test_with_the_named_registry_lost_the_image_comes_from_a_peer(tmp_path: Path) -> None:
    client = Registries({LOST: False, PEER: True})
    sources = RegistrySources(LOST)
    sources.attach(lambda: [Advertised(LOST, True), Advertised(PEER, True)])
    manifest, _ = image()
    digest = pull(tmp_path, client, sources, f"{LOST}/app:v1@{digest_of(manifest)}")
    assert digest == digest_of(manifest)
    # The lost one once (the named one first: its host still looked live), then the peer
    # for everything, the manifest and each blob: the one that answered is asked first.
    assert client.asked[0] == (LOST, "manifest")
    assert client.asked[1:] == [(PEER, "manifest"), (PEER, "blob"), (PEER, "blob")]


def test_a_registry_membership_calls_dead_is_tried_last(tmp_path: Path) -> None:
    client = Registries({LOST: True, PEER: True})
    sources = RegistrySources(LOST)
    sources.attach(lambda: [Advertised(LOST, False), Advertised(PEER, True)])
    pull(tmp_path, client, sources, f"{LOST}/app:v1")
    assert {registry for registry, _ in client.asked} == {PEER}


def test_every_cluster_registry_is_trusted_as_the_given_one(tmp_path: Path) -> None:
    client = Registries({LOST: False, PEER: True})
    trust = RegistryTrust("-----BEGIN CERTIFICATE-----\n")
    sources = RegistrySources(LOST, trust=trust)
    sources.attach(lambda: [Advertised(PEER, True)])
    pull(tmp_path, client, sources, f"{LOST}/app:v1")
    assert client.trusted == {LOST: trust, PEER: trust}


def test_none_answering_is_the_pulls_failure_naming_each(tmp_path: Path) -> None:
    client = Registries({})
    sources = RegistrySources(LOST)
    sources.attach(lambda: [Advertised(PEER, True)])
    with pytest.raises(RegistryError) as failed:
        pull(tmp_path, client, sources, f"{LOST}/app:v1")
    assert LOST in str(failed.value)
    assert PEER in str(failed.value)


def test_a_registry_outside_the_cluster_is_asked_alone(tmp_path: Path) -> None:
    client = Registries({PEER: True})
    sources = RegistrySources(LOST)
    sources.attach(lambda: [Advertised(PEER, True)])
    with pytest.raises(RegistryError):
        pull(tmp_path, client, sources, f"{ELSEWHERE}/app:v1")
    assert {registry for registry, _ in client.asked} == {ELSEWHERE}
