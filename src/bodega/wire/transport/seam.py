"""How a JSON client's calls travel: the seam between ``JsonClient`` and an HTTP library.

A ``Transport`` sends one ``Call`` and hands back its ``Answer``, or streams the
answer's body as it comes. Two implement it: ``aiohttp_transport`` (pooled
aiohttp sessions, for daemons that make thousands of calls to many peers; the
default) and ``stream_http`` (HTTP/1.1 on asyncio's own streams, for a command that
makes a few calls and exits: aiohttp's import is longer than such a command's work;
and for a client's one-by-one submits at the jobs doors, where it costs less a call).

Either says what went wrong in the same two ways, which ``JsonClient`` turns
into bodega's errors: ``NotConnected`` (no connection was made, so the server
cannot have seen the call: ``Unreachable``) and ``NoAnswer`` (the call may have
been sent and no answer came back: ``Indeterminate``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol

CONNECT_TIMEOUT = 3.0  # seconds to open a connection (loopback or a LAN peer)


@dataclass(frozen=True)
class Call:
    method: str
    url: str  # absolute, without a query
    query: Sequence[tuple[str, str]] = ()
    headers: Mapping[str, str] | None = None
    body: bytes | None = None  # sent as it is; its content-type is among the headers
    timeout: float | None = None  # the whole call, answer included; None: no bound
    connect_timeout: float | None = None  # making the connection
    # Sent as it comes instead (chunked), by the aiohttp transport alone: a relayed stream
    # (a VM's migration between workers) whose length no one knows ahead.
    chunks: AsyncIterable[bytes] | None = None


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes


@dataclass(frozen=True)
class Streamed:
    status: int
    chunks: AsyncIterator[bytes]  # the body, as it arrives
    headers: Mapping[str, str] = field(default_factory=dict)  # names in lower case


class NotConnected(Exception):
    """No connection was made: the server cannot have seen the call."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # a few words a person reads: "connection refused"


class NoAnswer(Exception):
    """The call may have reached the server, and no (whole) answer came back.
    ``str()`` is the cause's class and message: ``TimeoutError``,
    ``ServerDisconnectedError Server disconnected``."""


class Transport(Protocol):
    async def send(self, call: Call) -> Answer: ...

    def stream(self, call: Call) -> AbstractAsyncContextManager[Streamed]: ...

    async def aclose(self) -> None: ...


def cause(exc: BaseException) -> str:
    """An exception as ``NoAnswer`` words it: its class, then its message if it has one."""
    return f"{exc.__class__.__name__} {exc}".strip()


async def lines(chunks: AsyncIterable[bytes]) -> AsyncGenerator[bytes, None]:
    """The lines of a streamed body, without their ends, however long: an NDJSON record is
    one line, and may be longer than a reader's line buffer."""
    pending = bytearray()
    async for chunk in chunks:
        scanned = len(pending)  # the bytes before hold no line end: look only at the new
        pending += chunk
        begin = 0
        while (end := pending.find(b"\n", scanned)) != -1:
            yield bytes(pending[begin:end]).rstrip(b"\r")
            begin = scanned = end + 1
        del pending[:begin]
    if pending:
        yield bytes(pending).rstrip(b"\r")
