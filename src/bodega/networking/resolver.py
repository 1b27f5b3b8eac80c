"""The private network's resolver: UDP DNS on the resolver's address, one per host.

Every host serves the same address (``Layout.resolver``), so a machine's
``/etc/resolv.conf`` is the same wherever it runs. The asker's network is read
from its source address (its network field; machines cannot choose their
address), and ``names.answer`` decides from a snapshot of the registry view,
refreshed when older than ``FRESH`` (answers follow the view within that, plus
the view's own lag). Other names go to the host's resolvers; if none answers,
SERVFAIL.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from dnslib import AAAA, QTYPE, RCODE, RR, TXT, DNSRecord

from bodega.networking.core.directory import asker_network
from bodega.networking.core.names import Directory, Outcome, answer
from bodega.networking.core.sixpn import Layout
from bodega.runtime.waits import within

log = logging.getLogger("bodega.networking.resolver")

FRESH = 0.2  # seconds a directory snapshot is reused
CACHE_LIMIT = 10_000  # replies kept per snapshot (a query repeats the same bytes but its id)
TTL = 5  # seconds: short, so a machine that stops drops out of caches quickly
UPSTREAM_TIMEOUT = 2.0


@dataclass
class ResolverStats:
    answered: int = 0
    recursed: int = 0
    refused: int = 0
    failed: int = 0


@dataclass
class Resolver:
    layout: Layout
    region: str
    snapshot: Callable[[], Directory]  # reads the registry view
    upstreams: list[str] = field(default_factory=list)
    stats: ResolverStats = field(default_factory=ResolverStats)
    clock: Callable[[], float] = time.monotonic
    _directory: Directory | None = None
    _taken_at: float = 0.0
    # Per snapshot: replies by (source, query without its id); kept while the view is the same.
    _replies: dict[tuple[str, bytes], bytes] = field(default_factory=dict)

    def directory(self) -> Directory:
        now = self.clock()
        if self._directory is None or now - self._taken_at > FRESH:
            fresh = self.snapshot()
            if fresh != self._directory or len(self._replies) > CACHE_LIMIT:
                self._replies.clear()
            self._directory, self._taken_at = fresh, now
        return self._directory

    def reply(self, data: bytes, source: str) -> bytes | None:
        """The reply to one query, or None when it must be recursed (or is not DNS)."""
        directory = self.directory()
        known = self._replies.get((source, data[2:]))
        if known is not None:
            self.stats.answered += 1
            return data[:2] + known
        out = self._decide(data, source, directory)
        if out:
            self._replies[(source, data[2:])] = out[2:]
        return out

    def _decide(self, data: bytes, source: str, directory: Directory) -> bytes | None:
        try:
            request = DNSRecord.parse(data)
        except Exception:
            return b""  # not DNS: ignored
        network = asker_network(source, directory, self.layout)
        reply = request.reply()
        if network is None:
            self.stats.refused += 1
            reply.header.rcode = RCODE.REFUSED
            return bytes(reply.pack())
        qname = str(request.q.qname)
        decided = answer(qname, QTYPE[request.q.qtype], network, directory, self.region)
        if decided.outcome is Outcome.RECURSE:
            return None
        self.stats.answered += 1
        if decided.outcome is Outcome.NXDOMAIN:
            reply.header.rcode = RCODE.NXDOMAIN
        for address in decided.aaaa:
            reply.add_answer(RR(qname, QTYPE.AAAA, rdata=AAAA(address), ttl=TTL))
        for text in decided.txt:
            reply.add_answer(RR(qname, QTYPE.TXT, rdata=TXT(text), ttl=TTL))
        return bytes(reply.pack())

    async def recurse(self, data: bytes) -> bytes:
        self.stats.recursed += 1
        for upstream in self.upstreams:
            try:
                return await within(_ask(upstream, data), UPSTREAM_TIMEOUT)
            except (OSError, TimeoutError):
                continue
        self.stats.failed += 1
        reply = DNSRecord.parse(data).reply()
        reply.header.rcode = RCODE.SERVFAIL
        return bytes(reply.pack())


async def _ask(upstream: str, data: bytes) -> bytes:
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in upstream else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setblocking(False)
    try:
        await loop.sock_connect(sock, (upstream, 53))
        await loop.sock_sendall(sock, data)
        return await loop.sock_recv(sock, 65535)
    finally:
        sock.close()


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)  # uvloop's is no subclass

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        source = str(addr[0])
        try:
            out = self.resolver.reply(data, source)
        except Exception:
            log.exception("answering a query from %s failed", source)
            return
        if out is None:
            asyncio.get_running_loop().create_task(self._recurse(data, addr))
        elif out and self.transport is not None:
            self.transport.sendto(out, addr)

    async def _recurse(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        out = await self.resolver.recurse(data)
        if self.transport is not None:
            self.transport.sendto(out, addr)


async def serve(resolver: Resolver, host: str, port: int = 53) -> asyncio.DatagramTransport:
    """Serve ``resolver`` on UDP ``host``:``port``; close the transport to stop."""
    loop = asyncio.get_running_loop()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND: the address may come a moment later
    # Every worker on one kernel serves the same address (each on its bridge); they answer
    # alike, from the same registry view, so the kernel may hand a query to any of them.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    transport, _ = await loop.create_datagram_endpoint(lambda: _Protocol(resolver), sock=sock)
    return transport


def host_upstreams(text: str) -> list[str]:
    """The nameservers of a resolv.conf."""
    return [line.split()[1] for line in text.splitlines()
            if line.startswith("nameserver") and len(line.split()) > 1]
