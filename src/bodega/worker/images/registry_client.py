"""The OCI distribution protocol, the few calls a pull needs, over aiohttp.

Plain HTTP for loopback registries (and any listed as insecure), HTTPS
otherwise; basic auth, or a bearer token fetched from the realm a ``401``
names. Blobs stream to a file and are hashed as they arrive: the store keeps
one only if it hashed to its digest. Credentials are never logged.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from bodega.worker.images.manifest import ACCEPT
from bodega.worker.images.reference import ImageReference

CHUNK = 1 << 20
_PARAM_RE = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """The registry refused or failed; the message says which reference and why."""


class RegistryClient:
    def __init__(self, username: str | None = None, password: str | None = None,
                 insecure: tuple[str, ...] = ()) -> None:
        self.auth = aiohttp.BasicAuth(username, password or "") if username else None
        self.insecure = insecure
        self._tokens: dict[str, str] = {}

    def _base(self, ref: ImageReference) -> str:
        host = ref.registry.rsplit(":", 1)[0]
        plain = host in ("127.0.0.1", "localhost", "::1") or ref.registry in self.insecure
        return f"{'http' if plain else 'https'}://{ref.registry}/v2/{ref.repository}"

    async def _token(self, session: aiohttp.ClientSession, challenge: str) -> str:
        params = dict(_PARAM_RE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise RegistryError("bearer challenge without a realm")
        async with session.get(realm, params=params, auth=self.auth) as reply:
            if reply.status != 200:
                raise RegistryError(f"token service answered {reply.status}")
            body = await reply.json()
        return str(body.get("token") or body.get("access_token") or "")

    async def _get(self, session: aiohttp.ClientSession, ref: ImageReference, url: str,
                   headers: dict[str, str],
                   consume: Callable[[aiohttp.ClientResponse], Awaitable[None]]) -> None:
        for _ in range(2):
            sent = dict(headers)
            token = self._tokens.get(ref.registry)
            auth = None
            if token:
                sent["Authorization"] = f"Bearer {token}"
            else:
                auth = self.auth
            async with session.get(url, headers=sent, auth=auth) as reply:
                if reply.status == 401:
                    challenge = reply.headers.get("WWW-Authenticate", "")
                    if challenge.lower().startswith("bearer"):
                        self._tokens[ref.registry] = await self._token(session, challenge)
                        continue
                    raise RegistryError(f"{ref}: unauthorized")
                if reply.status == 404:
                    raise RegistryError(f"{ref}: not found in the registry")
                if reply.status != 200:
                    raise RegistryError(f"{ref}: registry answered {reply.status}")
                await consume(reply)
                return
        raise RegistryError(f"{ref}: unauthorized")

    async def manifest(self, ref: ImageReference, version: str) -> tuple[bytes, str]:
        """The manifest or index ``version`` (tag or digest) names, and its content type."""
        found: list[tuple[bytes, str]] = []

        async def read(reply: aiohttp.ClientResponse) -> None:
            found.append((await reply.read(), reply.headers.get("Content-Type", "")))

        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
                await self._get(s, ref, f"{self._base(ref)}/manifests/{version}",
                                {"Accept": ACCEPT}, read)
        except aiohttp.ClientError as exc:
            raise RegistryError(f"{ref}: {exc}") from exc
        return found[0]

    async def blob(self, ref: ImageReference, digest: str, dest: Path) -> str:
        """Stream blob ``digest`` into ``dest``; returns the sha256 digest of what arrived."""
        hasher = hashlib.sha256()

        async def write(reply: aiohttp.ClientResponse) -> None:
            with dest.open("wb") as out:
                async for chunk in reply.content.iter_chunked(CHUNK):
                    hasher.update(chunk)
                    out.write(chunk)
                out.flush()

        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
                    total=None, sock_read=60)) as s:
                await self._get(s, ref, f"{self._base(ref)}/blobs/{digest}", {}, write)
        except aiohttp.ClientError as exc:
            raise RegistryError(f"{ref}: {exc}") from exc
        return f"sha256:{hasher.hexdigest()}"
