"""The pull's thin shell: look at the store, do the step ``plan.next_step`` names, repeat.

Pulls of one reference take turns on a lock, so concurrent creates of one
image pull it once: the second finds it complete. ``pull:blob:after`` is a
failpoint (a blob kept, the next not fetched) for the crash tests.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from bodega.runtime.failpoints import Failpoints
from bodega.worker.images.core.manifest import BadImage, is_index, pick_platform
from bodega.worker.images.core.plan import (
    Done,
    FetchBlob,
    FetchManifest,
    Resolve,
    Unpack,
    next_step,
)
from bodega.worker.images.core.reference import ImageReference, parse_reference
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore

log = logging.getLogger("bodega.worker.images")

MAX_STEPS = 1000  # a pull that keeps finding work is a bug, not a long image


@dataclass
class PullStats:
    blobs_fetched: int = 0
    unpacks: int = 0


class Puller:
    def __init__(self, store: ImageStore, client: RegistryClient,
                 default_registry: str | None = None,
                 failpoints: Failpoints = Failpoints()) -> None:
        self.store = store
        self.client = client
        self.default_registry = default_registry
        self.failpoints = failpoints
        self.stats = PullStats()
        self._locks: dict[str, asyncio.Lock] = {}

    def reference(self, image: str) -> ImageReference:
        return parse_reference(image, self.default_registry)

    async def pull(self, image: str) -> str:
        """Make ``image`` complete in the store; returns its manifest digest."""
        ref = self.reference(image)
        lock = self._locks.setdefault(str(ref), asyncio.Lock())
        async with lock:
            for _ in range(MAX_STEPS):
                view = await asyncio.to_thread(self.store.view, ref)
                step = next_step(view)
                match step:
                    case Done(manifest_digest=digest):
                        await asyncio.to_thread(self.store.touch, digest)
                        return digest
                    case Resolve():
                        await self._resolve(ref, image)
                    case FetchManifest(digest=digest):
                        body, _ = await self.client.manifest(ref, digest)
                        if await asyncio.to_thread(self.store.put_blob, body) != digest:
                            raise BadImage(f"{ref}: manifest does not match {digest}")
                    case FetchBlob(descriptor=descriptor):
                        partial = self.store.partial(descriptor.digest)
                        arrived = await self.client.blob(ref, descriptor.digest, partial)
                        await asyncio.to_thread(self.store.commit_blob, descriptor.digest,
                                                arrived)
                        self.stats.blobs_fetched += 1
                        log.info("%s: fetched %s (%d bytes)", ref, descriptor.digest,
                                 descriptor.size)
                        self.failpoints.hit("pull", "blob", "after")
                    case Unpack(manifest_digest=digest, manifest=manifest):
                        await asyncio.to_thread(self.store.unpack, digest, manifest)
                        self.stats.unpacks += 1
                        log.info("%s: unpacked %s", ref, digest)
        raise BadImage(f"{ref}: the pull did not settle")

    async def _resolve(self, ref: ImageReference, image: str) -> None:
        body, content_type = await self.client.manifest(ref, ref.version)
        if is_index(body, content_type):
            digest = pick_platform(body).digest
        else:
            digest = await asyncio.to_thread(self.store.put_blob, body)
        self.store.record_ref(ref, digest, image)
