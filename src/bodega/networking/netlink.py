"""A machine's private address and routes, given over rtnetlink from inside its namespace.

The private network gives each machine's ``eth0`` an IPv6 address and two routes
(to the gateway, and the default through it) as its create attaches the network.
``ip -n <ns> -batch`` did it: a process forked and exec'd on every create, about
3.5 ms of the create's path on a busy worker. Here one thread enters the namespace
(``setns``: the thread's alone), opens a route netlink socket there, sends the
three requests at once and reads their three acks: about 0.2 ms. The requests are
``ip addr replace`` and ``ip route replace``'s own, so a repeat changes nothing.
pyroute2 does the same through a process (or a thread) of its own per namespace,
which measured 3-7 ms here, no faster than ``ip``.

The thread is made for the call and ends with it: a thread of a pool would go on in
the machine's namespace, and whatever ran on it next (an ``ip`` of the host) with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import errno
import functools
import ipaddress
import os
import socket
import struct
import threading
from pathlib import Path

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000

# linux/rtnetlink.h, linux/netlink.h, linux/if_addr.h
RTM_NEWADDR, RTM_NEWROUTE, NLMSG_ERROR = 20, 24, 2
NLM_F_REQUEST, NLM_F_ACK, NLM_F_REPLACE, NLM_F_CREATE = 0x1, 0x4, 0x100, 0x400
IFA_ADDRESS, IFA_LOCAL, IFA_FLAGS, IFA_F_NODAD = 1, 2, 8, 0x2
RTA_DST, RTA_OIF, RTA_GATEWAY = 1, 4, 5
RT_TABLE_MAIN, RTPROT_BOOT, RTN_UNICAST = 254, 3, 1
RT_SCOPE_UNIVERSE, RT_SCOPE_LINK = 0, 253

_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix length, flags, scope, interface
_RTMSG = struct.Struct("=BBBBBBBBI")  # family, dst/src lengths, tos, table, protocol,
#                                       scope, type, flags


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _request(kind: int, sequence: int, body: bytes) -> bytes:
    flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_REPLACE | NLM_F_CREATE
    return _HEADER.pack(_HEADER.size + len(body), kind, flags, sequence, 0) + body


def requests(index: int, address: ipaddress.IPv6Address,
             gateway: ipaddress.IPv6Address) -> list[bytes]:
    """``addr replace <address>/128 dev <index> nodad``, ``route replace <gateway> dev
    <index>`` and ``route replace ::/0 via <gateway> dev <index>``, in that order; pure."""
    device = _attribute(RTA_OIF, struct.pack("=i", index))
    return [
        _request(RTM_NEWADDR, 1, _IFADDRMSG.pack(socket.AF_INET6, 128, 0, RT_SCOPE_UNIVERSE,
                                                 index)
                 + _attribute(IFA_LOCAL, address.packed) + _attribute(IFA_ADDRESS, address.packed)
                 + _attribute(IFA_FLAGS, struct.pack("=I", IFA_F_NODAD))),
        _request(RTM_NEWROUTE, 2, _RTMSG.pack(socket.AF_INET6, 128, 0, 0, RT_TABLE_MAIN,
                                              RTPROT_BOOT, RT_SCOPE_LINK, RTN_UNICAST, 0)
                 + _attribute(RTA_DST, gateway.packed) + device),
        _request(RTM_NEWROUTE, 3, _RTMSG.pack(socket.AF_INET6, 0, 0, 0, RT_TABLE_MAIN,
                                              RTPROT_BOOT, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0)
                 + _attribute(RTA_GATEWAY, gateway.packed) + device),
    ]


def errors(reply: bytes) -> list[tuple[int, int]]:
    """(sequence, errno) of each ack in ``reply``; errno 0 is success; pure."""
    found = []
    offset = 0
    while offset + _HEADER.size <= len(reply):
        length, kind, _flags, sequence, _port = _HEADER.unpack_from(reply, offset)
        if length < _HEADER.size:
            break
        if kind == NLMSG_ERROR:
            (error,) = struct.unpack_from("=i", reply, offset + _HEADER.size)
            found.append((sequence, -error))
        offset += (length + 3) & ~3
    return found


def _give(netns: str, device: str, address: ipaddress.IPv6Address,
          gateway: ipaddress.IPv6Address) -> None:
    """In this thread, which the call made for itself: enter ``netns`` and send."""
    try:
        fd = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise OSError(exc.errno, f"no network namespace {netns}: {exc.strerror}") from exc
    try:
        if _libc().setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"cannot enter network namespace {netns}: "
                                 f"{os.strerror(error)}")
    finally:
        os.close(fd)
    try:
        index = socket.if_nametoindex(device)
    except OSError as exc:
        raise OSError(errno.ENODEV, f"no device {device} in network namespace {netns}") from exc
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        sock.settimeout(5)
        wanted = requests(index, address, gateway)
        sock.sendall(b"".join(wanted))
        heard: list[tuple[int, int]] = []
        while len(heard) < len(wanted):
            heard += errors(sock.recv(65536))
        for sequence, error in heard:
            if error:
                what = {1: "its address", 2: "its route to the gateway", 3: "its default route"}
                raise OSError(error, f"cannot give {device} in {netns} "
                                     f"{what.get(sequence, 'its address and routes')} "
                                     f"({address} via {gateway}): {os.strerror(error)}")


async def give(netns: str, address: ipaddress.IPv6Address, gateway: ipaddress.IPv6Address,
               device: str = "eth0") -> None:
    """Give ``device`` in ``netns`` ``address``/128 and a default route through ``gateway``
    (which it reaches on the link); ``OSError`` saying which part failed."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def run() -> None:
        error: BaseException | None = None
        try:
            _give(netns, device, address, gateway)
        except BaseException as exc:  # handed to the awaiting coroutine
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits
            loop.call_soon_threadsafe(_settle, done, error)

    threading.Thread(target=run, name=f"netlink-{netns}", daemon=True).start()
    await done


def _settle(done: asyncio.Future[None], error: BaseException | None) -> None:
    if done.done():  # the caller was cancelled meanwhile
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
