"""A host across a link that can be cut: a machine there, the proxy here.

The host is a network namespace on a bridge in the test's own namespace
(``tests/cluster/netns_kit.py``, one host). ``listen`` opens a listening
socket inside it: a thread enters the namespace (``setns`` moves that thread
alone), makes the socket and ends, and the socket stays in the namespace it
was made in, so a server in the test's event loop serves from that host.
``cut`` takes the host's port on the bridge down, a cable pulled: the bridge
keeps its address and route, so what the proxy sends there is lost without a
word (no refusal, no unreachable), as to a host that stopped answering, on
connections it already holds as on new ones.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bodega.worker.host.network import run
from tests.cluster.netns_kit import Hosts, hosts

CLONE_NEWNET = 0x40000000


@dataclass
class FarHost:
    hosts: Hosts

    @property
    def address(self) -> str:
        return self.hosts.address(1)

    def listen(self) -> socket.socket:
        """A TCP socket listening on the host's address, on a port of its choosing."""
        made: list[socket.socket | BaseException] = []

        def inside() -> None:
            try:
                fd = os.open(f"/run/netns/{self.hosts.namespace(1)}", os.O_RDONLY)
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    if libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), "setns failed")
                finally:
                    os.close(fd)
                listener = socket.socket()
                listener.bind((self.address, 0))
                listener.listen(64)
                made.append(listener)
            except BaseException as exc:  # handed to the caller's thread
                made.append(exc)

        thread = threading.Thread(target=inside)  # ends with the call: never reused
        thread.start()
        thread.join()
        found = made[0]
        if isinstance(found, BaseException):
            raise found
        return found

    async def cut(self) -> None:
        await self.hosts.link(1, up=False)


@contextlib.asynccontextmanager
async def far_host() -> AsyncIterator[FarHost]:
    async with hosts(1) as made:
        try:
            yield FarHost(made)
        finally:
            # The link at once: a namespace goes (and its veth with it) only once nothing
            # holds it, and the next test's host would take the same name.
            await run("ip", "link", "del", f"btv{made.tag}-1", check=False)
