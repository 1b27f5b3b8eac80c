"""The gossip endpoints: real UDP on loopback, and the in-memory fake with the same seam."""

from __future__ import annotations

import asyncio
import socket

from bodega.registry.membership.core.members import Addr
from bodega.registry.membership.transport import MemoryNetwork, UdpTransport


async def test_udp_endpoint_reads_every_buffered_datagram_in_one_turn() -> None:
    got: list[bytes] = []
    endpoint = await UdpTransport.bind("127.0.0.1", 0, lambda data, addr: got.append(data))
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            for i in range(10):
                raw.sendto(b"%d" % i, endpoint.local_addr)
        for _ in range(1000):  # bounded: one loop turn at a time
            if got:
                break
            await asyncio.sleep(0)
        # All at once: a tick cannot slip in between buffered acks.
        assert got == [b"%d" % i for i in range(10)]
    finally:
        endpoint.close()


async def test_udp_endpoint_keeps_receiving_after_sending_to_a_stopped_peer() -> None:
    got: list[tuple[bytes, Addr]] = []
    a = await UdpTransport.bind("127.0.0.1", 0, lambda data, addr: got.append((data, addr)))
    b = await UdpTransport.bind("127.0.0.1", 0, lambda data, addr: None)
    gone = b.local_addr
    b.close()
    try:
        assert a.send(b"to nobody", gone)  # any port-unreachable error must not stop the reader
        await asyncio.sleep(0.05)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            raw.bind(("127.0.0.1", 0))
            raw.sendto(b"still here", a.local_addr)
            for _ in range(200):
                if got:
                    break
                await asyncio.sleep(0.01)
            assert got == [(b"still here", raw.getsockname())]
    finally:
        a.close()
    assert not a.send(b"closed", gone)


async def test_memory_transport_delivers_between_endpoints_and_honours_blocking() -> None:
    net = MemoryNetwork()
    got: list[tuple[bytes, Addr]] = []
    a = await net.bind("10.0.0.1", 0, lambda data, addr: None)
    b = await net.bind("10.0.0.2", 7946, lambda data, addr: got.append((data, addr)))
    a.send(b"hi", ("10.0.0.2", 7946))
    await asyncio.sleep(0)
    assert got == [(b"hi", a.local_addr)]
    net.blocked.add(b.local_addr)
    a.send(b"lost", b.local_addr)
    b.close()
    assert not b.send(b"from a closed endpoint", a.local_addr)
    a.send(b"gone", ("10.0.0.2", 7946))
    await asyncio.sleep(0)
    assert got == [(b"hi", a.local_addr)]
