"""Just enough HTTP/1.1 to proxy it: read a message head, frame its body, copy bytes.

The proxy never buffers a body: it reads the head, works out how the body
is delimited (``Content-Length``, ``chunked``, or until the connection
closes), and copies it through in pieces, so uploads and downloads of any
size stream in both directions. Heads are bounded; anything malformed is a
``BadMessage`` that the proxy answers with 400.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Protocol

MAX_HEAD = 64 * 1024
CHUNK = 64 * 1024
# Not forwarded: they describe one hop, not the message (RFC 9110 section 7.6.1).
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                        b"upgrade", b"proxy-authenticate", b"proxy-authorization"})


class Writer(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class BadMessage(Exception):
    """The peer sent something that is not HTTP/1.x we can frame."""


@dataclass
class Head:
    start: list[bytes]  # request: method, target, version; response: version, status, reason
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    def get(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def tokens(self, name: bytes) -> set[bytes]:
        out: set[bytes] = set()
        for key, value in self.headers:
            if key.lower() == name:
                out.update(t.strip().lower() for t in value.split(b","))
        return out

    @property
    def version(self) -> bytes:
        return self.start[2] if self.is_request else self.start[0]

    @property
    def is_request(self) -> bool:
        return not self.start[0].startswith(b"HTTP/")

    @property
    def method(self) -> bytes:
        return self.start[0]

    @property
    def status(self) -> int:
        return int(self.start[1])

    def keep_alive(self) -> bool:
        connection = self.tokens(b"connection")
        if self.version == b"HTTP/1.0":
            return b"keep-alive" in connection
        return b"close" not in connection

    def upgrade(self) -> bool:
        return b"upgrade" in self.tokens(b"connection") and self.get(b"upgrade") is not None

    def chunked(self) -> bool:
        encoding = self.get(b"transfer-encoding")
        return encoding is not None and encoding.lower().rstrip().endswith(b"chunked")

    def content_length(self) -> int | None:
        value = self.get(b"content-length")
        if value is None:
            return None
        if not value.strip().isdigit():
            raise BadMessage(f"bad Content-Length {value!r}")
        return int(value)

    def forwarded(self, extra: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """The end-to-end headers, with ``extra`` appended."""
        return [(k, v) for k, v in self.headers if k.lower() not in HOP_BY_HOP] + extra

    def encode(self, headers: list[tuple[bytes, bytes]] | None = None) -> bytes:
        lines = [b" ".join(self.start)]
        lines += [k + b": " + v for k, v in (self.headers if headers is None else headers)]
        return b"\r\n".join(lines) + b"\r\n\r\n"


def parse_head(data: bytes) -> Head:
    lines = data.rstrip(b"\r\n").split(b"\r\n")
    start = lines[0].split(b" ", 2)
    if len(start) < 2:
        raise BadMessage(f"bad start line {lines[0][:100]!r}")
    if len(start) == 2:
        start.append(b"")
    head = Head(start)
    if head.is_request and not start[2].startswith(b"HTTP/1."):
        raise BadMessage(f"unsupported protocol {start[2][:20]!r}")
    if not head.is_request and not start[1].isdigit():
        raise BadMessage(f"bad status line {lines[0][:100]!r}")
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise BadMessage(f"bad header line {line[:100]!r}")
        head.headers.append((name, value.strip()))
    return head


async def read_head(reader: asyncio.StreamReader) -> Head | None:
    """The next message head, or None if the peer closed cleanly between messages."""
    try:
        data = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadMessage("connection closed in the middle of a message head") from None
    except asyncio.LimitOverrunError:
        raise BadMessage(f"message head over {MAX_HEAD} bytes") from None
    return parse_head(data)


def response_has_body(request_method: bytes, response: Head) -> bool:
    status = response.status
    return not (request_method == b"HEAD" or 100 <= status < 200 or status in (204, 304))


async def copy_body(head: Head, reader: asyncio.StreamReader, writer: Writer,
                    *, until_close: bool = False) -> None:
    """Copy the body that follows ``head`` from ``reader`` to ``writer``, as framed."""
    if head.chunked():
        await _copy_chunked(reader, writer)
        return
    length = head.content_length()
    if length is not None:
        await _copy_exactly(reader, writer, length, "a body")
        return
    if until_close:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()


async def _copy_chunked(reader: asyncio.StreamReader, writer: Writer) -> None:
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise BadMessage(f"bad chunk size {size_line[:40]!r}") from None
        writer.write(size_line)
        if size == 0:
            while True:  # trailers, then the blank line that ends the body
                line = await reader.readuntil(b"\r\n")
                writer.write(line)
                if line == b"\r\n":
                    await writer.drain()
                    return
        await _copy_exactly(reader, writer, size + 2, "a chunk")  # the data and its CRLF


async def _copy_exactly(reader: asyncio.StreamReader, writer: Writer, length: int,
                        what: str) -> None:
    while length:
        data = await reader.read(min(CHUNK, length))
        if not data:
            raise BadMessage(f"connection closed in the middle of {what}")
        writer.write(data)
        length -= len(data)
        await writer.drain()


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF (an upgraded connection, e.g. a WebSocket), then half-close."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if writer.can_write_eof() and not writer.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                writer.write_eof()
