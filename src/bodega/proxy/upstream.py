"""Keep-alive connections to machines, pooled per address.

Reusing a connection saves a TCP handshake per request; an idle one is kept
for less time than servers usually keep theirs (uvicorn: 5 s), so the proxy
rarely sends on a connection the machine has just closed. When it does
(nothing comes back), the request goes again on a fresh connection.

A connect gives up after ``routes.CONNECT_TIMEOUT``: a machine whose host stopped
answering (its link down, say) drops the SYN instead of refusing it, and a
request should go to another machine within a fraction of a second, not wait
for TCP's retransmissions. Both data planes use it (HAProxy's ``timeout
connect``). A connect to the last machine that could take a request is given
longer (``routes.PATIENT_CONNECT_TIMEOUT``).

A connection kept from before a host stopped answering fails no connect: a
request sent on it is simply never acknowledged. The kernel gives up on it
once what was sent has gone unacknowledged for ``routes.ACK_TIMEOUT``
(``TCP_USER_TIMEOUT``: the read fails with ``ETIMEDOUT``). A host that is up
acknowledges within a round trip however slow its program, so a slow answer
is never cut for this. The bound is lifted while a body or a tunnel goes out
(``Conn.watch_acks``): a program may leave those unread, its receive window
closed, for as long as it likes, and the kernel counts a window closed that
long against the bound too. A new connection is not bounded either: its host
answered its handshake a moment ago, and what it leaves unacknowledged is a
machine whose accept queue is full (a burst at a machine just started), whose
request is worth waiting for rather than sending to another machine (or
waking one for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections import deque
from dataclasses import dataclass, field

from bodega.proxy.core.routes import ACK_TIMEOUT, CONNECT_TIMEOUT
from bodega.runtime.waits import within

IDLE_SECONDS = 3.0
MAX_IDLE_PER_ADDRESS = 64
UPSTREAM_BUFFER = 2**16  # a StreamReader's limit on a connection to a machine

Address = tuple[str, int]


@dataclass
class Conn:
    address: Address
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False
    idle_since: float = field(default_factory=time.monotonic)
    acks_watched: bool = False  # as ``connect`` leaves a new one

    def watch_acks(self, on: bool) -> None:
        """Give up on the connection once what was sent goes unacknowledged for
        ``ACK_TIMEOUT`` (``on``), or never: while a body or a tunnel goes out, which the
        machine may leave unread with its window closed."""
        if on != self.acks_watched:
            _ack_timeout(self.writer, ACK_TIMEOUT if on else 0)
            self.acks_watched = on

    def usable(self) -> bool:
        return not (self.writer.is_closing() or self.reader.at_eof())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class ConnectFailed(Exception):
    """The machine did not accept a connection: nothing was sent, trying another is safe.

    ``refused``: its host answered that nothing listens there (the machine stopped, or is
    still binding its port); otherwise nothing answered in time, or its host is unreachable.
    """

    def __init__(self, message: str, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


class Upstreams:
    def __init__(self, idle_seconds: float = IDLE_SECONDS,
                 connect_timeout: float = CONNECT_TIMEOUT) -> None:
        self.idle_seconds = idle_seconds
        self.connect_timeout = connect_timeout
        self._idle: dict[Address, deque[Conn]] = {}

    async def connect(self, address: Address, *, fresh: bool = False,
                      timeout: float | None = None) -> Conn:
        """An idle pooled connection (unless ``fresh``), or a new one made within ``timeout``
        seconds (None: ``connect_timeout``)."""
        if not fresh:
            pool = self._idle.get(address)
            now = time.monotonic()
            while pool:
                conn = pool.pop()
                if conn.usable() and now - conn.idle_since < self.idle_seconds:
                    conn.reused = True
                    return conn
                conn.close()
        try:
            reader, writer = await within(
                asyncio.open_connection(*address, limit=UPSTREAM_BUFFER),
                self.connect_timeout if timeout is None else timeout)
        except (OSError, TimeoutError) as exc:
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc) or repr(exc)
            raise ConnectFailed(f"{address[0]}:{address[1]}: {why}",
                                refused=isinstance(exc, ConnectionRefusedError)) from exc
        return Conn(address, reader, writer)

    def release(self, conn: Conn) -> None:
        """Return a connection whose last response was read to the end."""
        pool = self._idle.setdefault(conn.address, deque())
        if not conn.usable() or len(pool) >= MAX_IDLE_PER_ADDRESS:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        conn.reused = False
        pool.append(conn)

    def forget(self, address: Address) -> None:
        """Close every idle connection to a machine that stopped or moved away."""
        for conn in self._idle.pop(address, deque()):
            conn.close()

    def close(self) -> None:
        for address in list(self._idle):
            self.forget(address)


def _ack_timeout(writer: asyncio.StreamWriter, seconds: float) -> None:
    sock = writer.get_extra_info("socket")
    # A connection closed meanwhile has nothing left to bound: what is written next says so.
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, round(seconds * 1000))
