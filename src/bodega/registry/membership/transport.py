"""Datagram transports for gossip: real UDP, and an in-memory fake with the same seam.

The UDP endpoint reads with its own reader callback that drains the socket
completely each time it is readable. asyncio's datagram transport reads one
packet per loop iteration, so after a stall the membership tick would run
between two buffered packets and could time out a probe whose ack is still
sitting in the socket; draining first hands every buffered ack to the state
machine before the next tick looks at any deadline.
"""

from __future__ import annotations

import asyncio
import errno
import socket
from collections.abc import Awaitable, Callable
from typing import Protocol

from bodega.registry.membership.core.members import Addr
from bodega.runtime.binding import BindError

Receiver = Callable[[bytes, Addr], None]
MAX_DATAGRAM = 65535
DRAIN_BATCH = 512  # per readiness event, so a flood cannot starve the loop


class Transport(Protocol):
    @property
    def local_addr(self) -> Addr: ...

    def send(self, data: bytes, addr: Addr) -> bool:
        """Hand ``data`` to the network; False if it could not even leave."""
        ...

    def close(self) -> None: ...


Binder = Callable[[str, int, Receiver], Awaitable[Transport]]


class UdpTransport:
    def __init__(self, sock: socket.socket, receiver: Receiver) -> None:
        self._sock = sock
        self._receiver = receiver
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._drain)
        self._closed = False

    @classmethod
    async def bind(cls, host: str, port: int, receiver: Receiver) -> UdpTransport:
        """A UDP endpoint on ``host:port`` (port 0: an ephemeral port, see ``local_addr``)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_DGRAM)
        family, kind, proto, _, sockaddr = infos[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.bind(sockaddr)
        except OSError as exc:
            sock.close()
            raise BindError(exc, host, port, "UDP") from exc
        return cls(sock, receiver)

    @property
    def local_addr(self) -> Addr:
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    def send(self, data: bytes, addr: Addr) -> bool:
        if self._closed:
            return False
        try:
            self._sock.sendto(data, addr)
        except OSError:  # a full buffer or an unreachable peer: gossip tolerates loss
            return False
        return True

    def _drain(self) -> None:
        for _ in range(DRAIN_BATCH):
            try:
                data, addr = self._sock.recvfrom(MAX_DATAGRAM)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                # ICMP errors for earlier sends surface here (e.g. port unreachable
                # from a stopped peer); they concern no packet we can read.
                if e.errno in (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH):
                    continue
                raise
            self._receiver(data, (str(addr[0]), int(addr[1])))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()


class MemoryNetwork:
    """In-process datagrams between ``MemoryTransport``s, delivered on the next loop turn."""

    def __init__(self) -> None:
        self._endpoints: dict[Addr, MemoryTransport] = {}
        self._next_port = 40000
        self.blocked: set[Addr] = set()  # endpoints that neither send nor receive

    async def bind(self, host: str, port: int, receiver: Receiver) -> MemoryTransport:
        if port == 0:
            self._next_port += 1
            port = self._next_port
        addr = (host, port)
        if addr in self._endpoints:
            raise OSError(errno.EADDRINUSE, f"{host}:{port} is in use")
        endpoint = MemoryTransport(self, addr, receiver)
        self._endpoints[addr] = endpoint
        return endpoint

    def _deliver(self, data: bytes, src: Addr, dst: Addr) -> None:
        endpoint = self._endpoints.get(dst)
        if endpoint is None or src in self.blocked or dst in self.blocked:
            return
        asyncio.get_running_loop().call_soon(endpoint.receive, data, src)

    def _unbind(self, addr: Addr) -> None:
        self._endpoints.pop(addr, None)


class MemoryTransport:
    def __init__(self, network: MemoryNetwork, addr: Addr, receiver: Receiver) -> None:
        self._network = network
        self._addr = addr
        self._receiver = receiver
        self._closed = False

    @property
    def local_addr(self) -> Addr:
        return self._addr

    def send(self, data: bytes, addr: Addr) -> bool:
        if self._closed:
            return False
        self._network._deliver(data, self._addr, addr)
        return True

    def receive(self, data: bytes, src: Addr) -> None:
        if not self._closed:
            self._receiver(data, src)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._network._unbind(self._addr)
