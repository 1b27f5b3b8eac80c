"""A machine's private address and routes, given over rtnetlink from inside its namespace.

The private network gives each machine's ``eth0`` an IPv6 address and two routes
(to the gateway, and the default through it) as its create attaches the network.
``ip -n <ns> -batch`` did it: a process forked and exec'd on every create, about
3.5 ms of the create's path on a busy worker. Here one thread enters the namespace
(``setns``: the thread's alone) and opens a route netlink socket there, on which the
three requests go at once and their three acks come back: about 0.2 ms. The requests are
``ip addr replace`` and ``ip route replace``'s own, so a repeat changes nothing.
pyroute2 does the same through a process (or a thread) of its own per namespace,
which measured 3-7 ms here, no faster than ``ip``.

The thread is made for the call and ends with it: a thread of a pool would go on in
the machine's namespace, and whatever ran on it next (an ``ip`` of the host) with it.

A thread on a create's path still waited for the event loop's thread to let go of the
interpreter, each time it came back from a system call: 1-2.5 ms on a worker answering
the create meanwhile. A socket stays in the namespace it was made in, so the thread only
makes the socket (``Link``), and the loop's own thread sends the requests on it: the
kernel answers a route netlink request within the send. A namespace wired ahead has its
``Link`` made then, off the path, for the create that attaches it. That send takes the
kernel's rtnl lock, so it waits while another holds it: the kernel tearing down a
namespace deleted just before held the loop 1-9 ms in a test of six deletions, against a
median of 17 ms for a thread to get its answer back to a loop kept busy (0.2 ms on the
loop's own thread).
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
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

from bodega.runtime.waits import within

NETNS_DIR = Path("/run/netns")
T = TypeVar("T")
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
             gateway: ipaddress.IPv6Address, base: int = 0) -> list[bytes]:
    """``addr replace <address>/128 dev <index> nodad``, ``route replace <gateway> dev
    <index>`` and ``route replace ::/0 via <gateway> dev <index>``, in that order, numbered
    ``base`` + 1, 2, 3; pure."""
    device = _attribute(RTA_OIF, struct.pack("=i", index))
    return [
        _request(RTM_NEWADDR, base + 1, _IFADDRMSG.pack(socket.AF_INET6, 128, 0, RT_SCOPE_UNIVERSE,
                                                 index)
                 + _attribute(IFA_LOCAL, address.packed) + _attribute(IFA_ADDRESS, address.packed)
                 + _attribute(IFA_FLAGS, struct.pack("=I", IFA_F_NODAD))),
        _request(RTM_NEWROUTE, base + 2, _RTMSG.pack(socket.AF_INET6, 128, 0, 0, RT_TABLE_MAIN,
                                              RTPROT_BOOT, RT_SCOPE_LINK, RTN_UNICAST, 0)
                 + _attribute(RTA_DST, gateway.packed) + device),
        _request(RTM_NEWROUTE, base + 3, _RTMSG.pack(socket.AF_INET6, 0, 0, 0, RT_TABLE_MAIN,
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


def _enter(netns: str) -> tuple[int, int]:
    """Move this thread (only) into ``netns``; the namespace's ``identity``."""
    try:
        fd = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise OSError(exc.errno, f"no network namespace {netns}: {exc.strerror}") from exc
    try:
        found = os.fstat(fd)
        if _libc().setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, f"cannot enter network namespace {netns}: "
                                 f"{os.strerror(error)}")
    finally:
        os.close(fd)
    return found.st_dev, found.st_ino


def _device_index(netns: str, device: str) -> int:
    try:
        return socket.if_nametoindex(device)
    except OSError as exc:
        raise OSError(errno.ENODEV, f"no device {device} in network namespace {netns}") from exc


def _raise_refused(heard: list[tuple[int, int]], device: str, netns: str,
                   address: ipaddress.IPv6Address, gateway: ipaddress.IPv6Address) -> None:
    """``OSError`` for the first request (1, 2, 3: ``requests``' order) the kernel refused."""
    for sequence, error in heard:
        if error:
            what = {1: "its address", 2: "its route to the gateway", 3: "its default route"}
            raise OSError(error, f"cannot give {device} in {netns} "
                                 f"{what.get(sequence, 'its address and routes')} "
                                 f"({address} via {gateway}): {os.strerror(error)}")


def identity(netns: str) -> tuple[int, int]:
    """Which namespace the name stands for now (the device and inode of its file: a
    namespace deleted and made again under the same name is another)."""
    found = os.stat(NETNS_DIR / netns)
    return found.st_dev, found.st_ino


class Link:
    """A route netlink socket made inside a namespace, with its device's index there.

    Made by ``open_link``; ``give`` sends from the calling thread. The socket holds the
    namespace alive: whoever keeps a link closes it when the namespace is deleted."""

    def __init__(self, netns: str, sock: socket.socket, device: str, index: int,
                 made: tuple[int, int]) -> None:
        self.netns, self.sock, self.device, self.index, self.made = \
            netns, sock, device, index, made
        self._sequence = 0

    def current(self) -> bool:
        """Whether the namespace by its name is still the one the socket was made in."""
        try:
            return identity(self.netns) == self.made
        except OSError:
            return False

    async def give(self, address: ipaddress.IPv6Address,
                   gateway: ipaddress.IPv6Address) -> None:
        """What ``give`` does, on this socket; ``OSError`` saying which part failed."""
        loop = asyncio.get_running_loop()
        base = self._sequence
        self._sequence = (base + 3) % 0xFFFF_FFF0  # a netlink sequence is 32 bits
        wanted = requests(self.index, address, gateway, base)
        # Sent and answered without a trip through the loop (which would run whatever else
        # is ready first): the kernel has queued the acks by the time the send returns.
        message = b"".join(wanted)
        try:
            self.sock.sendall(message)  # one datagram: sent whole or not at all
        except BlockingIOError:
            await loop.sock_sendall(self.sock, message)
        heard: list[tuple[int, int]] = []
        while len(heard) < len(wanted):  # an ack of an earlier call, cut off, is not ours
            try:
                reply = self.sock.recv(65536)
            except BlockingIOError:
                try:
                    reply = await within(loop.sock_recv(self.sock, 65536), 5)
                except TimeoutError:
                    raise OSError(errno.ETIMEDOUT, f"no answer from the kernel in {self.netns} "
                                                   f"for {self.device}'s address") from None
            heard += [(sequence - base, error) for sequence, error in errors(reply)
                      if base < sequence <= base + len(wanted)]
        _raise_refused(heard, self.device, self.netns, address, gateway)

    def close(self) -> None:
        self.sock.close()


async def open_link(netns: str, device: str = "eth0") -> Link:
    """A ``Link`` into ``netns``, made by a thread of its own; ``OSError`` if there is no
    such namespace or device."""
    return await _in_namespace(netns, lambda: _open(netns, device))


def _open(netns: str, device: str) -> Link:
    made = _enter(netns)
    index = _device_index(netns, device)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC,
                         socket.NETLINK_ROUTE)
    sock.setblocking(False)
    return Link(netns, sock, device, index, made)


async def give(netns: str, address: ipaddress.IPv6Address, gateway: ipaddress.IPv6Address,
               device: str = "eth0") -> None:
    """Give ``device`` in ``netns`` ``address``/128 and a default route through ``gateway``
    (which it reaches on the link); ``OSError`` saying which part failed. With no ``Link``
    kept for the namespace: one is made for the call (``open_link``) and closed after."""
    link = await open_link(netns, device)
    try:
        await link.give(address, gateway)
    finally:
        link.close()


async def _in_namespace(netns: str, call: Callable[[], T]) -> T:
    """``call`` on a thread made for it (it enters ``netns``, and ends with the call)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def run() -> None:
        try:
            outcome: tuple[T | None, BaseException | None] = (call(), None)
        except BaseException as exc:  # handed to the awaiting coroutine
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody awaits
            loop.call_soon_threadsafe(_settle, done, *outcome)

    threading.Thread(target=run, name=f"netlink-{netns}", daemon=True).start()
    return await done


def _settle(done: asyncio.Future[T], value: T | None, error: BaseException | None) -> None:
    if done.done():  # the caller was cancelled meanwhile
        if isinstance(value, Link):
            value.close()
        return
    if error is None:
        done.set_result(cast(T, value))
    else:
        done.set_exception(error)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
