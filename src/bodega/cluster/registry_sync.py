"""A server host's image registry catching up with the others: anti-entropy by digest.

A push lands on every live registry of the cluster, from the client
(docs/images.md, "Every server host a registry"); one whose host was down then,
or a server host's that joined later, lacks what was pushed meanwhile. The host's
supervisor (``bodega up``, ``bodega join --server``) holds the admin token, so it
runs this loop beside its components: every ``interval`` it asks its own broker
for the live registries (``GET /v1/cluster``) and copies from each other one what
its own lacks (``model/image_copies.py`` decides): blobs first, then the
manifests that name them, then missing tags. Over the registries' doors, as any
push and pull: TLS checked against the cluster CA, the admin token as basic
auth's password. A round that fails (a peer lost mid-copy) is logged and the next
one starts over; what was copied stays, since every name is a digest.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yarl

from bodega.model.image_copies import copies, named_by
from bodega.wire.public.cluster_info import ClusterInfo
from bodega.worker.images.core.manifest import ACCEPT

log = logging.getLogger("bodega.cluster.registry_sync")

INTERVAL = 30.0  # seconds between rounds
CHUNK = 1 << 20
PAGE = 1000  # repositories per catalog page (docker-registry's most)
Registries = Callable[[], Awaitable[list[str]]]


@dataclass
class Copied:
    """What a round copied into the registry."""

    blobs: int = 0
    manifests: int = 0
    tags: list[str] = field(default_factory=list)


class RegistrySync:
    def __init__(self, own: str, registries: Registries, token: str | None,
                 ca_pem: str | None, interval: float = INTERVAL) -> None:
        """``own``: this host's registry (host:port); ``registries``: the cluster's live
        ones; ``ca_pem``: their CA (None: plain HTTP, a cluster without internal TLS)."""
        self.own = own
        self.registries = registries
        self.interval = interval
        self._headers = ({"Authorization": "Basic " + base64.b64encode(
            f"bodega:{token}".encode()).decode()} if token else {})
        self._ssl: ssl.SSLContext | bool = False
        if ca_pem is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.load_verify_locations(cadata=ca_pem)
            self._ssl = context
        self._scheme = "https" if ca_pem is not None else "http"

    async def run(self) -> None:
        while True:
            try:
                copied = await self.round()
            except Exception as exc:  # the next round starts over: every name is a digest
                log.warning("catching the image registry up failed: %s", exc)
            else:
                if copied.manifests or copied.tags:
                    log.info("copied %d manifests and %d blobs into the image registry; "
                             "tagged %s", copied.manifests, copied.blobs,
                             ", ".join(copied.tags) or "nothing")
            await asyncio.sleep(self.interval)

    async def round(self) -> Copied:
        """Copy what every other live registry holds and this one lacks."""
        copied = Copied()
        peers = [r for r in await self.registries() if r != self.own]
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=60)
        async with aiohttp.ClientSession(timeout=timeout, headers=self._headers) as session:
            for peer in peers:
                try:
                    await self._catch_up(session, peer, copied)
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    log.warning("could not catch up from the image registry at %s: %s",
                                peer, exc or type(exc).__name__)
        return copied

    def _url(self, registry: str, path: str) -> str:
        return f"{self._scheme}://{registry}/v2/{path}"

    async def _json(self, session: aiohttp.ClientSession, url: str) -> dict[str, object]:
        async with session.get(url, ssl=self._ssl) as reply:
            if reply.status == 404:
                return {}
            reply.raise_for_status()
            found = await reply.json(content_type=None)
            return found if isinstance(found, dict) else {}

    async def _catalog(self, session: aiohttp.ClientSession, registry: str) -> list[str]:
        """Every repository of ``registry``, page after page (``Link: <...>; rel=next``)."""
        names: list[str] = []
        url: yarl.URL | None = yarl.URL(self._url(registry, f"_catalog?n={PAGE}"))
        while url is not None:
            async with session.get(url, ssl=self._ssl) as reply:
                reply.raise_for_status()
                found = await reply.json(content_type=None)
                listed = found.get("repositories") if isinstance(found, dict) else None
                names += [str(n) for n in listed or []]
                following = reply.links.get("next")
                url = (reply.url.join(yarl.URL(str(following["url"])))
                       if following is not None and following.get("url") else None)
        return names

    async def _tags(self, session: aiohttp.ClientSession, registry: str,
                    repository: str) -> dict[str, str]:
        """Each tag of ``repository`` in ``registry`` and the digest it names."""
        listed = await self._json(session, self._url(registry, f"{repository}/tags/list"))
        tags = listed.get("tags") or []
        found = {}
        for tag in tags if isinstance(tags, list) else []:
            digest = await self._digest(session, registry, repository, str(tag))
            if digest is not None:
                found[str(tag)] = digest
        return found

    async def _digest(self, session: aiohttp.ClientSession, registry: str, repository: str,
                      version: str) -> str | None:
        """The digest of the manifest ``version`` names in ``registry``; None: none."""
        async with session.head(self._url(registry, f"{repository}/manifests/{version}"),
                                headers={"Accept": ACCEPT}, ssl=self._ssl) as reply:
            if reply.status == 404:
                return None
            reply.raise_for_status()
            return reply.headers.get("Docker-Content-Digest")

    async def _catch_up(self, session: aiohttp.ClientSession, peer: str,
                        copied: Copied) -> None:
        for name in await self._catalog(session, peer):
            theirs = await self._tags(session, peer, name)
            mine = await self._tags(session, self.own, name)
            held = {d for d in set(theirs.values()) - set(mine.values())
                    if await self._digest(session, self.own, name, d) is not None}
            held |= set(mine.values())
            for copy in copies(theirs, mine, held):
                if copy.manifest:
                    await self._manifest(session, peer, name, copy.digest, copied)
                if copy.retag:  # from this registry's own copy, held by now
                    body, kind = await self._get_manifest(session, self.own, name,
                                                          copy.digest)
                    await self._put_manifest(session, name, copy.tag, body, kind)
                    copied.tags.append(f"{name}:{copy.tag}")

    async def _manifest(self, session: aiohttp.ClientSession, peer: str, repository: str,
                        digest: str, copied: Copied) -> None:
        """Copy manifest ``digest`` and everything it names (children first)."""
        body, kind = await self._get_manifest(session, peer, repository, digest)
        named = named_by(body)
        for child in named.manifests:
            if await self._digest(session, self.own, repository, child) is None:
                await self._manifest(session, peer, repository, child, copied)
        for blob in named.blobs:
            if not await self._has_blob(session, repository, blob):
                await self._blob(session, peer, repository, blob)
                copied.blobs += 1
        await self._put_manifest(session, repository, digest, body, kind)
        copied.manifests += 1

    async def _get_manifest(self, session: aiohttp.ClientSession, registry: str,
                            repository: str, digest: str) -> tuple[bytes, str]:
        async with session.get(self._url(registry, f"{repository}/manifests/{digest}"),
                               headers={"Accept": ACCEPT}, ssl=self._ssl) as reply:
            reply.raise_for_status()
            return await reply.read(), reply.headers.get("Content-Type", "")

    async def _put_manifest(self, session: aiohttp.ClientSession, repository: str,
                            name: str, body: bytes, kind: str) -> None:
        """Put manifest ``body`` (of media type ``kind``) as ``name`` (its digest, or a
        tag) in this registry."""
        async with session.put(self._url(self.own, f"{repository}/manifests/{name}"),
                               data=body, ssl=self._ssl,
                               headers={"Content-Type": kind}) as reply:
            reply.raise_for_status()

    async def _has_blob(self, session: aiohttp.ClientSession, repository: str,
                        digest: str) -> bool:
        async with session.head(self._url(self.own, f"{repository}/blobs/{digest}"),
                                ssl=self._ssl) as reply:
            return reply.status == 200

    async def _blob(self, session: aiohttp.ClientSession, peer: str, repository: str,
                    digest: str) -> None:
        """Stream blob ``digest`` from ``peer`` into this registry (a monolithic upload:
        the registry checks it hashes to ``digest``)."""
        async with session.post(self._url(self.own, f"{repository}/blobs/uploads/"),
                                ssl=self._ssl) as started:
            started.raise_for_status()
            location = started.headers["Location"]
        upload = started.url.join(yarl.URL(location)).update_query({"digest": digest})
        async with session.get(self._url(peer, f"{repository}/blobs/{digest}"),
                               ssl=self._ssl) as source:
            source.raise_for_status()
            length = source.headers.get("Content-Length")

            async def body() -> AsyncIterator[bytes]:
                async for chunk in source.content.iter_chunked(CHUNK):
                    yield chunk

            async with session.put(upload, data=body(), ssl=self._ssl, headers={
                    "Content-Type": "application/octet-stream",
                    **({"Content-Length": length} if length else {})}) as done:
                done.raise_for_status()


def cluster_registries(api_url: str, token: str) -> Registries:
    """The live registries the broker at ``api_url`` lists (``GET /v1/cluster``)."""

    async def ask() -> list[str]:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session, \
                session.get(f"{api_url}/v1/cluster",
                            headers={"Authorization": f"Bearer {token}"}) as reply:
            reply.raise_for_status()
            info = ClusterInfo.model_validate(await reply.json(content_type=None))
        return info.image_registries or ([info.image_registry] if info.image_registry else [])

    return ask


def keep_caught_up(own: str | None, api_url: str | None, token: str,
                   ca: Path | None) -> asyncio.Task[None] | None:
    """The loop that catches this server host's registry (``own``) up with the others,
    asking its broker (``api_url``) where they are; None for a host that serves none.
    ``ca``: the cluster CA's certificate file (None: plain HTTP)."""
    if own is None or api_url is None or not token:
        return None
    ca_pem = ca.read_text() if ca is not None else None
    sync = RegistrySync(own, cluster_registries(api_url, token), token, ca_pem)
    return asyncio.create_task(sync.run())
