"""The pull's thin shell: look at the store, do the step ``plan.next_step`` names, repeat.

Pulls of one reference take turns on a lock, so concurrent creates of one
image pull it once: the second finds it complete. ``pull:blob:after`` is a
failpoint (a blob kept, the next not fetched) for the crash tests.

Each fetch goes to the registries ``sources`` lists for the reference, in
turn, until one answers (``sources.py``): the image is addressed by digest, so
which of the cluster's registries serves a blob does not matter, and the one
that answered is asked first for the rest of the pull.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

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
from bodega.worker.images.registry_client import RegistryClient, RegistryError
from bodega.worker.images.sources import RegistrySources
from bodega.worker.images.store import ImageStore

log = logging.getLogger("bodega.worker.images")

MAX_STEPS = 1000  # a pull that keeps finding work is a bug, not a long image
T = TypeVar("T")


@dataclass
class PullStats:
    blobs_fetched: int = 0
    unpacks: int = 0


class Puller:
    def __init__(self, store: ImageStore, client: RegistryClient,
                 default_registry: str | None = None,
                 failpoints: Failpoints = Failpoints(),
                 sources: RegistrySources | None = None) -> None:
        self.store = store
        self.sources = sources
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
            order = (self.sources.order(ref.registry, self.client)
                     if self.sources is not None else [ref.registry])
            for _ in range(MAX_STEPS):
                view = await asyncio.to_thread(self.store.view, ref)
                step = next_step(view)
                match step:
                    case Done(manifest_digest=digest):
                        await asyncio.to_thread(self.store.touch, digest)
                        return digest
                    case Resolve():
                        await self._resolve(ref, image, order)
                    case FetchManifest(digest=digest):
                        body, _ = await self._fetch(
                            ref, order, partial(self.client.manifest, version=digest))
                        if await asyncio.to_thread(self.store.put_blob, body) != digest:
                            raise BadImage(f"{ref}: manifest does not match {digest}")
                    case FetchBlob(descriptor=descriptor):
                        arrived = await self._fetch(ref, order, partial(
                            self.client.blob, digest=descriptor.digest,
                            dest=self.store.partial(descriptor.digest)))
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

    async def _fetch(self, ref: ImageReference, order: list[str],
                     call: Callable[[ImageReference], Awaitable[T]]) -> T:
        """``call`` against each registry in ``order`` until one answers; that one moves to
        the front of ``order`` for the rest of the pull. The last refusal if none does."""
        failures: list[str] = []
        for registry in list(order):
            at = ref if registry == ref.registry else dataclasses.replace(ref, registry=registry)
            try:
                found = await call(at)
            except RegistryError as exc:
                failures.append(str(exc))
                if len(order) > 1:
                    log.warning("%s; trying the next registry", exc)
                continue
            order.remove(registry)
            order.insert(0, registry)
            return found
        raise RegistryError("; ".join(failures) or f"{ref}: no registry to pull from")

    async def _resolve(self, ref: ImageReference, image: str, order: list[str]) -> None:
        body, content_type = await self._fetch(
            ref, order, partial(self.client.manifest, version=ref.version))
        if is_index(body, content_type):
            digest = pick_platform(body).digest
        else:
            digest = await asyncio.to_thread(self.store.put_blob, body)
        self.store.record_ref(ref, digest, image)
