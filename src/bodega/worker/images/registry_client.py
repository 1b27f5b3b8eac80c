"""The OCI distribution protocol, the few calls a pull needs, over aiohttp.

A registry given a ``RegistryTrust`` (the cluster's, ``--image-registry-ca``)
is reached over HTTPS, its certificate checked against that CA, the worker
showing its own certificate from the cluster CA: that is how the cluster's
registry lets a worker pull, with no password. Others: plain HTTP for
loopback registries (and any listed as insecure), HTTPS checked against the
system's CAs otherwise; basic auth, or a bearer token fetched from the realm
a ``401`` names. Blobs stream to a file and are hashed as they arrive: the
store keeps one only if it hashed to its digest. Credentials are never
logged.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

import aiohttp

from bodega.worker.images.core.manifest import ACCEPT
from bodega.worker.images.core.reference import ImageReference

CHUNK = 1 << 20
# Seconds to reach a registry: a lost host's is given up on soon, for the next one.
CONNECT_TIMEOUT = 5.0
_PARAM_RE = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """The registry refused or failed; the message says which reference and why."""


class RegistryTrust:
    """TLS to one registry: its certificate checked against ``ca_pem``, and the worker's
    own key and certificate (``identity``, a TLS directory's ``identity.pem``) shown. The
    file is read again when it changes, so a renewed certificate is shown from the next
    pull on."""

    def __init__(self, ca_pem: str, identity: Path | None = None) -> None:
        self.ca_pem = ca_pem
        self.identity = identity
        self._context: ssl.SSLContext | None = None
        self._stamp: tuple[int, int] | None = None

    def context(self) -> ssl.SSLContext:
        stamp = None
        if self.identity is not None:
            with contextlib.suppress(OSError):
                found = self.identity.stat()
                stamp = (found.st_mtime_ns, found.st_size)
        if self._context is None or stamp != self._stamp:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # the chain and the address
            context.load_verify_locations(cadata=self.ca_pem)
            if stamp is not None and self.identity is not None:
                context.load_cert_chain(self.identity)
            self._context, self._stamp = context, stamp
        return self._context


class RegistryClient:
    def __init__(self, username: str | None = None, password: str | None = None,
                 insecure: tuple[str, ...] = (),
                 trusted: Mapping[str, RegistryTrust] | None = None) -> None:
        """``trusted``: registry host:port -> how it is reached over TLS (the cluster's)."""
        self.auth = aiohttp.BasicAuth(username, password or "") if username else None
        self.insecure = insecure
        self.trusted = dict(trusted or {})
        self._tokens: dict[str, str] = {}

    def _base(self, ref: ImageReference) -> str:
        host = ref.registry.rsplit(":", 1)[0]
        plain = (host in ("127.0.0.1", "localhost", "::1") or ref.registry in self.insecure) \
            and ref.registry not in self.trusted
        return f"{'http' if plain else 'https'}://{ref.registry}/v2/{ref.repository}"

    def _ssl(self, ref: ImageReference) -> ssl.SSLContext | bool:
        """The TLS a request to ``ref``'s registry uses (True: the system's CAs)."""
        trust = self.trusted.get(ref.registry)
        return trust.context() if trust is not None else True

    async def _token(self, session: aiohttp.ClientSession, ref: ImageReference,
                     challenge: str) -> str:
        params = dict(_PARAM_RE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise RegistryError("bearer challenge without a realm")
        async with session.get(realm, params=params, auth=self.auth,
                               ssl=self._ssl(ref)) as reply:
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
            async with session.get(url, headers=sent, auth=auth, ssl=self._ssl(ref)) as reply:
                if reply.status == 401:
                    challenge = reply.headers.get("WWW-Authenticate", "")
                    if challenge.lower().startswith("bearer"):
                        self._tokens[ref.registry] = await self._token(session, ref,
                                                                       challenge)
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
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
                    total=60, sock_connect=CONNECT_TIMEOUT)) as s:
                await self._get(s, ref, f"{self._base(ref)}/manifests/{version}",
                                {"Accept": ACCEPT}, read)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RegistryError(f"{ref}: {exc or type(exc).__name__}") from exc
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
                    total=None, sock_connect=CONNECT_TIMEOUT, sock_read=60)) as s:
                await self._get(s, ref, f"{self._base(ref)}/blobs/{digest}", {}, write)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise RegistryError(f"{ref}: {exc or type(exc).__name__}") from exc
        return f"sha256:{hasher.hexdigest()}"
