"""HTTP/1.1 on asyncio's own streams: the command line's transport, and the jobs doors'.

A command makes a few calls to one API and exits. aiohttp, the daemons' client,
takes longer to import than that work (its parsers, and two TLS contexts it
loads from disk at import, https or not); this client imports nothing asyncio
has not already. It speaks what bodega's servers answer: HTTP/1.1, a body of a
known length or chunked, connections kept alive and reused by later calls (a
listing asks once per app), TLS when the URL is https (the system's CAs, or the
context given). Where a caller could tell, it does what aiohttp does: a call on
a kept connection that the server had closed meanwhile is sent again on a new
one if its method is idempotent, and a connection is closed by aborting it.

A client submitting one-task jobs at the jobs doors (``DirectSubmits``) makes its
calls on it too: one small call after another on a kept connection, where it
costs less than half the CPU aiohttp does (about 50 us a call against 115, a body
of a known length read in one wait and a URL parsed once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import socket
import ssl as ssllib
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import quote, urlencode, urlsplit

from bodega.wire.transport.seam import Answer, Call, NoAnswer, NotConnected, Streamed, cause

T = TypeVar("T")

HEAD_LIMIT = 64 * 1024  # an answer's status line and headers, at most
PIECE = 64 * 1024  # a body is read this much at a time at most
CONNECTIONS = 32  # at once, as the daemons' sessions allow per server
IDLE_SECONDS = 30.0  # a kept connection idle longer is closed, not reused (servers keep 75 s)
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})
DEFAULT_PORT = {"http": 80, "https": 443}
# What goes wrong while asking or reading an answer, besides a timeout.
BROKEN = (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORT[self.scheme] else f"{host}:{self.port}"


@dataclass
class Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    used: float = field(default_factory=time.monotonic)

    def abort(self) -> None:
        self.writer.transport.abort()


@dataclass(frozen=True)
class Head:
    status: int
    headers: dict[str, str]  # names in lower case; a repeated one's values joined by ", "
    version: str

    @property
    def has_body(self) -> bool:
        return self.status >= 200 and self.status not in (204, 304)


class Deadline:
    """The end of a whole call (None: no end), bounding each wait in it."""

    def __init__(self, seconds: float | None) -> None:
        self.at = None if seconds is None else asyncio.get_running_loop().time() + seconds

    async def bound(self, work: Awaitable[T]) -> T:
        if self.at is None:
            return await work
        async with asyncio.timeout_at(self.at):
            return await work


class Stale(Exception):
    """A kept connection the server closed before answering: it never saw the call."""


class StreamHttp:
    """``ssl``: the client context for https URLs; None: one checking the system's CAs,
    made on the first https call."""

    def __init__(self, ssl: ssllib.SSLContext | None = None) -> None:
        self._ssl = ssl
        self._idle: dict[Origin, list[Connection]] = {}
        self._slots = asyncio.Semaphore(CONNECTIONS)

    async def aclose(self) -> None:
        for kept in self._idle.values():
            for connection in kept:
                connection.abort()
        self._idle.clear()

    async def send(self, call: Call) -> Answer:
        async with self._answer(call) as (head, body):
            whole = await body.whole()
        return Answer(head.status, whole)

    @contextlib.asynccontextmanager
    async def stream(self, call: Call) -> AsyncIterator[Streamed]:
        async with self._answer(call) as (head, body):
            yield Streamed(head.status, body.chunks(), head.headers)

    @contextlib.asynccontextmanager
    async def _answer(self, call: Call) -> AsyncIterator[tuple[Head, Body]]:
        """The answer's head and its body to read; the connection kept once that body was
        read to its end (and both sides keep it), else closed."""
        origin, target = _split(call.url, call.query)
        deadline = Deadline(call.timeout)
        async with self._slots:
            connection, head = await self._exchange(origin, target, call, deadline)
            body = Body(connection.reader, head, call.method, deadline)
            try:
                yield head, body
            finally:
                if body.reusable:
                    connection.used = time.monotonic()
                    self._idle.setdefault(origin, []).append(connection)
                else:
                    connection.abort()

    async def _exchange(self, origin: Origin, target: str, call: Call,
                        deadline: Deadline) -> tuple[Connection, Head]:
        """The answer's head, asked on a kept connection or a new one."""
        request = _request(origin, target, call)
        while (kept := self._kept(origin)) is not None:
            try:
                return kept, await _ask(kept, request, deadline, kept=True)
            except Stale:
                kept.abort()
                if call.method not in IDEMPOTENT:  # as aiohttp: only those are sent again
                    raise NoAnswer("the server closed a kept connection unanswered") from None
            except BaseException:
                kept.abort()
                raise
        connection = await self._connect(origin, call, deadline)
        try:
            return connection, await _ask(connection, request, deadline, kept=False)
        except BaseException:
            connection.abort()
            raise

    def _kept(self, origin: Origin) -> Connection | None:
        kept = self._idle.get(origin, [])
        while kept:
            connection = kept.pop()
            if (time.monotonic() - connection.used < IDLE_SECONDS
                    and not connection.reader.at_eof()):
                return connection
            connection.abort()
        return None

    async def _connect(self, origin: Origin, call: Call, deadline: Deadline) -> Connection:
        tls = self._context() if origin.scheme == "https" else None
        try:
            async with asyncio.timeout(call.connect_timeout):
                reader, writer = await deadline.bound(asyncio.open_connection(
                    origin.host, origin.port, ssl=tls, limit=HEAD_LIMIT,
                    server_hostname=origin.host if tls is not None else None))
        except TimeoutError:  # the connection's own bound, or the whole call's
            seconds = call.connect_timeout if call.connect_timeout is not None else call.timeout
            raise NotConnected(f"no connection in {seconds:g}s") from None
        except OSError as exc:
            raise NotConnected(why_unconnected(exc)) from exc
        return Connection(reader, writer)

    def _context(self) -> ssllib.SSLContext:
        if self._ssl is None:
            self._ssl = ssllib.create_default_context()
        return self._ssl


def why_unconnected(exc: OSError) -> str:
    """A few words on why a connection was not made, in the daemons' transport's words."""
    if isinstance(exc, socket.gaierror):
        return "host name not resolved"
    if isinstance(exc, ssllib.SSLCertVerificationError):
        return f"its certificate is refused: {exc.verify_message or exc}"
    if isinstance(exc, ssllib.SSLError):
        return f"TLS handshake failed: {exc.reason or exc}"
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return exc.__class__.__name__


def _split(url: str, query: Sequence[tuple[str, str]]) -> tuple[Origin, str]:
    origin, target = _place(url)
    if query:
        target += "?" + urlencode(list(query), quote_via=quote)
    return origin, target


@functools.lru_cache(maxsize=256)
def _place(url: str) -> tuple[Origin, str]:
    """A URL's origin and path, parsed once: a client calls a few URLs again and again (a
    jobs door's submit, one job after another)."""
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORT or not parts.hostname:
        raise ValueError(f"not an http or https URL: {url}")
    origin = Origin(parts.scheme, parts.hostname, parts.port or DEFAULT_PORT[parts.scheme])
    return origin, quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")


def _request(origin: Origin, target: str, call: Call) -> bytes:
    if call.chunks is not None:
        raise ValueError("a streamed body is the aiohttp transport's alone")
    lines = [f"{call.method} {target} HTTP/1.1", f"Host: {origin.authority}"]
    for name, value in (call.headers or {}).items():
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
            raise ValueError(f"header {name!r} holds a line break")
        lines.append(f"{name}: {value}")
    if call.body is not None or call.method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(call.body or b'')}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (call.body or b"")


async def _ask(connection: Connection, request: bytes, deadline: Deadline, *,
               kept: bool) -> Head:
    """Send the request; the answer's head. On a kept connection, nothing back at all
    (the server had closed it) is ``Stale``."""
    try:
        connection.writer.write(request)
        if connection.writer.transport.get_write_buffer_size():  # else no wait to bound
            await deadline.bound(connection.writer.drain())
        return await deadline.bound(_head(connection.reader))
    except (ConnectionError, asyncio.IncompleteReadError) as exc:
        partial = exc.partial if isinstance(exc, asyncio.IncompleteReadError) else b""
        if kept and not partial:
            raise Stale from exc
        raise NoAnswer(cause(exc)) from exc
    except (TimeoutError, *BROKEN) as exc:
        raise NoAnswer(cause(exc)) from exc


async def _head(reader: asyncio.StreamReader) -> Head:
    while True:
        lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
            raise ValueError(f"not an HTTP/1 answer: {lines[0][:80]!r}")
        headers: dict[str, str] = {}
        for line in filter(None, lines[1:]):
            name, sep, value = line.partition(":")
            if not sep:
                raise ValueError(f"not a header: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        status = int(rest[:3])
        if 100 <= status < 200 and status != 101:  # an interim answer: the real one follows
            continue
        return Head(status, headers, version)


class Body:
    """An answer's body, read as it comes: a known length, chunked, or up to the close."""

    def __init__(self, reader: asyncio.StreamReader, head: Head, method: str,
                 deadline: Deadline) -> None:
        self._reader = reader
        self._head = head
        self._method = method
        self._deadline = deadline
        self.reusable = False  # read to its end, on a connection both sides keep

    async def chunks(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._pieces():
                yield chunk
        except (TimeoutError, *BROKEN) as exc:
            raise NoAnswer(cause(exc)) from exc

    async def whole(self) -> bytes:
        """The whole body: a known length in one read (most answers), else its pieces."""
        head = self._head
        length = head.headers.get("content-length")
        if length is None or self._method == "HEAD" or not head.has_body \
                or "transfer-encoding" in head.headers:
            return b"".join([chunk async for chunk in self.chunks()])
        try:
            whole = await self._deadline.bound(self._reader.readexactly(int(length)))
        except (TimeoutError, *BROKEN) as exc:
            raise NoAnswer(cause(exc)) from exc
        self.reusable = self._keep()
        return whole

    def _keep(self) -> bool:
        """Whether the connection may carry another call once this body is read."""
        head = self._head
        return head.version == "HTTP/1.1" and \
            "close" not in head.headers.get("connection", "").lower()

    async def _pieces(self) -> AsyncIterator[bytes]:
        head, bound = self._head, self._deadline.bound
        keep = self._keep()
        if self._method == "HEAD" or not head.has_body:
            self.reusable = keep
            return
        if "chunked" in head.headers.get("transfer-encoding", "").lower():
            while size := int((await bound(self._reader.readuntil(b"\r\n")))
                              .split(b";")[0].strip(), 16):
                async for piece in self._exactly(size):
                    yield piece
                if await bound(self._reader.readexactly(2)) != b"\r\n":
                    raise ValueError("a chunk does not end where its size says")
            while await bound(self._reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers: none that matter here
            self.reusable = keep
        elif "content-length" in head.headers:
            async for piece in self._exactly(int(head.headers["content-length"])):
                yield piece
            self.reusable = keep
        else:  # the body ends with the connection
            while piece := await bound(self._reader.read(PIECE)):
                yield piece

    async def _exactly(self, size: int) -> AsyncIterator[bytes]:
        while size > 0:
            piece = await self._deadline.bound(self._reader.read(min(size, PIECE)))
            if not piece:
                raise asyncio.IncompleteReadError(b"", size)
            size -= len(piece)
            yield piece
