"""A registry catching up with another (cluster/registry_sync.py): two real docker-registry
processes, an image pushed to one; a round copies it to the other by digest, where a pull
finds it whole, and the next round copies nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx

from bodega.cluster.registry_sync import RegistrySync
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore

from .image_kit import build_image, needs_image_tools, registry

pytestmark = needs_image_tools


def digest_of(registry_address: str, name: str, tag: str) -> str | None:
    reply = httpx.head(f"http://{registry_address}/v2/{name}/manifests/{tag}", headers={
        "Accept": "application/vnd.oci.image.manifest.v1+json"})
    return reply.headers.get("Docker-Content-Digest") if reply.status_code == 200 else None


async def test_a_round_copies_what_the_registry_lacks_and_the_next_nothing(
        tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with registry(tmp_path / "a") as first, registry(tmp_path / "b") as late:
        image = build_image(tmp_path, first, "team/app:v1", extra_mb=2)
        second = build_image(tmp_path, first, "team/app:v2", page="two\n")
        # The late registry holds v2 already, under another tag: its manifest is not
        # copied again, only tagged.
        subprocess.run(["skopeo", "copy", "--src-tls-verify=false", "--dest-tls-verify=false",
                        f"docker://{second}", f"docker://{late}/team/app:old"],
                       check=True, capture_output=True)

        async def live() -> list[str]:
            return [first, late]

        sync = RegistrySync(late, live, None, None)
        copied = await sync.round()
        assert copied.manifests == 1  # v1; v2 was there as :old
        assert copied.blobs >= 2  # v1's config and its own layer at least
        assert sorted(copied.tags) == ["team/app:v1", "team/app:v2"]
        for tag in ("v1", "v2"):
            assert digest_of(late, "team/app", tag) == digest_of(first, "team/app", tag)
        assert digest_of(late, "team/app", "old") == digest_of(first, "team/app", "v2")

        again = await sync.round()
        assert (again.manifests, again.blobs, again.tags) == (0, 0, [])

        # What arrived is whole: a worker pulls it from the late registry alone.
        puller = Puller(ImageStore(tmp_path / "store"), RegistryClient())
        pinned = f"{late}/team/app:v1@{digest_of(first, 'team/app', 'v1')}"
        assert await puller.pull(pinned) == digest_of(first, "team/app", "v1")
        assert image.startswith(first)
