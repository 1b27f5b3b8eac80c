"""One exchange with a machine: send the request, relay the response (or the upgrade).

The request goes out on a pooled connection when one is idle; a pooled
connection found closed before any response byte (``StaleConnection``) is
replaced by a fresh one once, which is safe only for a request without a body
(nothing of it was consumed). A request whose bytes the machine's host never
acknowledged (``upstream.py``: its host stopped answering, the connection
kept from before) is ``HostSilent``: whether it may go to another machine is
``resendable``. Interim 1xx answers are dropped, a 101 turns the exchange into
a two-way pipe, and a small body goes out with its head in one write. The
connection returns to the pool when the machine keeps it open.
"""

from __future__ import annotations

import asyncio
import errno

from bodega.proxy.core.routes import Backend
from bodega.proxy.http1 import BadMessage, Head, copy_body, pipe, read_head, response_has_body
from bodega.proxy.upstream import Conn, Upstreams

SMALL_BODY = 64 * 1024


class StaleConnection(Exception):
    """A pooled connection turned out closed before any response byte."""


class UpstreamFailed(Exception):
    """The machine broke the exchange before the proxy wrote anything to the client."""


class HostSilent(Exception):
    """What the proxy sent the machine went unacknowledged for ``routes.ACK_TIMEOUT``,
    before any byte of an answer: its host stopped answering. The machine may still have
    received the request (a host acknowledges a request with its answer when the answer
    comes soon, and both were lost), so only a ``resendable`` one goes elsewhere."""


# RFC 9110's idempotent methods: sent twice, they do what they did once. (HAProxy's
# ``config.IDEMPOTENT`` names the same.)
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"PUT", b"DELETE", b"TRACE"})


def resendable(head: Head) -> bool:
    """Whether a request may go to another machine after one may have received it: its
    method idempotent, and no body (a body was read from the client as it went out)."""
    return (head.method in IDEMPOTENT and not head.chunked()
            and not head.content_length())


async def exchange(upstreams: Upstreams, backend: Backend, head: Head,
                   reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   extra: list[tuple[bytes, bytes]], request_id: str, *,
                   connect_timeout: float | None = None) -> tuple[bool, int]:
    """Forward one request to ``backend`` and relay its answer: (client stays open, status).

    Raises ``ConnectFailed`` when no connection could be made within ``connect_timeout``
    (None: the pool's; another machine may serve), ``HostSilent`` when the machine's host
    stopped acknowledging before any answer, ``UpstreamFailed`` when the machine broke off
    before the client heard anything.
    """
    upgrade = head.upgrade()
    hop = ([(b"connection", b"upgrade"), (b"upgrade", head.get(b"upgrade") or b"")]
           if upgrade else [(b"connection", b"keep-alive")])
    start = Head([head.method, head.start[1], b"HTTP/1.1"], head.forwarded(extra + hop))
    has_body = head.chunked() or bool(head.content_length())
    conn = await upstreams.connect(backend.address, timeout=connect_timeout)
    try:
        try:
            response = await _send(conn, start, head, reader, has_body)
        except StaleConnection:
            conn.close()
            conn = await upstreams.connect(backend.address, fresh=True, timeout=connect_timeout)
            response = await _send(conn, start, head, reader, has_body)
    except (ConnectionError, BadMessage, asyncio.IncompleteReadError) as exc:
        conn.close()
        raise UpstreamFailed(str(exc) or type(exc).__name__) from exc
    except BaseException:
        conn.close()
        raise
    try:
        return await _respond(upstreams, conn, head, response, reader, writer, upgrade,
                              request_id)
    except BaseException:
        conn.close()
        raise

async def _send(conn: Conn, start: Head, head: Head, reader: asyncio.StreamReader,
                has_body: bool) -> Head:
    """Send the request; the first response head that is not 100 Continue.

    Only a kept connection is given up when what is sent goes unacknowledged: its host may
    have gone since it last answered. A new one's host answered its handshake a moment ago,
    so what it leaves unacknowledged is a machine's full accept queue (a burst at a machine
    just started, say), whose request is waited for, not sent to another machine."""
    conn.watch_acks(conn.reused and not has_body)
    try:
        conn.writer.write(start.encode())
        if has_body:
            await copy_body(head, reader, conn.writer)
        await conn.writer.drain()
        while True:
            response = await read_head(conn.reader)
            if response is None:
                raise ConnectionResetError("the machine closed the connection")
            if 100 <= response.status < 200 and response.status != 101:
                continue  # interim responses (100 Continue) are not passed on
            return response
    except TimeoutError as exc:  # the kernel's ETIMEDOUT: ``routes.ACK_TIMEOUT`` passed
        if exc.errno != errno.ETIMEDOUT:
            raise
        raise HostSilent(f"{conn.address[0]}:{conn.address[1]}: what was sent went "
                         "unacknowledged") from exc
    except (ConnectionError, BadMessage) as exc:
        if conn.reused and not has_body:
            raise StaleConnection() from exc
        raise

async def _respond(upstreams: Upstreams, conn: Conn, head: Head, response: Head,
                   reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   upgrade: bool, request_id: str) -> tuple[bool, int]:
    ids = [(b"fly-request-id", request_id.encode())]
    if upgrade and response.status == 101:
        conn.watch_acks(False)  # a tunnel: the machine may leave what comes unread
        hop = [(b"connection", b"upgrade"), (b"upgrade", response.get(b"upgrade") or b"")]
        writer.write(response.encode(response.forwarded([*hop, *ids])))
        await writer.drain()
        await asyncio.gather(pipe(reader, conn.writer), pipe(conn.reader, writer))
        conn.close()
        return False, 101
    body = response_has_body(head.method, response)
    until_close = body and not response.chunked() and response.content_length() is None
    keep = head.keep_alive() and not until_close
    out = response.encode(response.forwarded(
        [(b"connection", b"keep-alive" if keep else b"close"), *ids]))
    length = response.content_length() if body and not response.chunked() else None
    if length is not None and length <= SMALL_BODY:
        # Head and a small body in one write: one send instead of two per response.
        writer.write(out + await conn.reader.readexactly(length))
    else:
        writer.write(out)
        if body:
            await copy_body(response, conn.reader, writer, until_close=until_close)
    await writer.drain()
    if response.keep_alive() and not until_close:
        upstreams.release(conn)
    else:
        conn.close()
    return keep, response.status
