"""The proxy's request path: pick a machine by Host, forward, stream back, keep connections.

    client ─ head ─▶ app from Host ─▶ choose (least outstanding, bands, nearest region)
                                          │ nothing / all over soft limit
                                          ▼
                                        wake (one start per app, wait for the port)
              ◀─ response streamed ─── forward to machine ── connect failed? next machine

Bodies are streamed both ways, never buffered; ``Upgrade`` (WebSocket)
becomes a two-way pipe. Every request gets ``X-Forwarded-For``,
``X-Forwarded-Proto`` and a request id (``fly-request-id`` and
``x-request-id``, kept if the client sent one). Errors the proxy itself
answers are plain text with the request id, so they can be found in logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from dataclasses import dataclass

from bodega.model.ids import new_ulid
from bodega.proxy.balance import choose
from bodega.proxy.http1 import (
    BadMessage,
    Head,
    copy_body,
    pipe,
    read_head,
    response_has_body,
)
from bodega.proxy.load import Load
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.routes import Backend, RoutingTable
from bodega.proxy.upstream import Conn, ConnectFailed, Upstreams
from bodega.proxy.wake import Waker

log = logging.getLogger("bodega.proxy")

MAX_TRIES = 3
CLIENT_IDLE = 60.0
SMALL_BODY = 64 * 1024
FORCE_INSTANCE = b"fly-force-instance-id"


@dataclass(frozen=True)
class ProxyConfig:
    region: str
    base_domain: str = "localhost"
    # Behind HAProxy (the activator): it already set X-Forwarded-* and the request id, and the
    # client's address is in them, not in this connection's peer.
    behind_data_plane: bool = False


class StaleConnection(Exception):
    """A pooled connection turned out closed before any response byte."""


class UpstreamFailed(Exception):
    """The machine broke the exchange before the proxy wrote anything to the client."""


class ProxyServer:
    def __init__(self, config: ProxyConfig, table: RoutingTable, upstreams: Upstreams,
                 waker: Waker, load: Load, metrics: ProxyMetrics,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self.table = table
        self.upstreams = upstreams
        self.waker = waker
        self.load = load
        self.metrics = metrics
        self.rng = rng or random.Random()
        self.ids = RequestIds()
        self._suffix = "." + config.base_domain.strip(".").lower()

    # -- connections --------------------------------------------------------------------
    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        client_ip = str(peer[0]) if peer else ""
        try:
            while True:
                async with asyncio.timeout(CLIENT_IDLE):
                    head = await read_head(reader)
                if head is None or not head.is_request:
                    break
                if not await self.request(head, reader, writer, client_ip):
                    break
        except BadMessage as exc:
            await self._answer(writer, 400, "", f"bad request: {exc}", new_ulid())
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    def app_for(self, host: bytes | None) -> str | None:
        if not host:
            return None
        name = host.decode("latin-1").split(":", 1)[0].lower().rstrip(".")
        if name.endswith(self._suffix):
            name = name[: -len(self._suffix)]
        return name if name and "." not in name else None

    async def request(self, head: Head, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter, client_ip: str) -> bool:
        """Serve one request; True if the client connection stays open for the next."""
        began = time.perf_counter()
        request_id = (head.get(b"fly-request-id") or head.get(b"x-request-id") or
                      self.ids.next()).decode("latin-1")
        app = self.app_for(head.get(b"host"))
        if app is None or not self.table.known_app(app):
            host = (head.get(b"host") or b"").decode("latin-1")
            await self._drain_body(head, reader)
            await self._answer(writer, 404, app or "", f"no app is served at {host!r} (use "
                               f"Host: <app>{self._suffix})", request_id)
            return head.keep_alive()
        forwarded = head.get(b"x-forwarded-for")
        extra = [] if self.config.behind_data_plane else [
            (b"x-forwarded-for", (forwarded + b", " if forwarded else b"") + client_ip.encode()),
            (b"x-forwarded-proto", b"http"), (b"x-request-id", request_id.encode()),
            (b"fly-request-id", request_id.encode()),
        ]
        extra_names = {k for k, _ in extra}
        head.headers = [(k, v) for k, v in head.headers if k.lower() not in extra_names]
        forced = head.get(FORCE_INSTANCE)
        tried: set[str] = set()
        code = 503
        reason = "no machine can serve"
        try:
            for _ in range(MAX_TRIES):
                backend, reason = await self._pick(app, frozenset(tried), forced)
                if backend is None:
                    break
                tried.add(backend.machine_id)
                self.load.begin(backend.machine_id)
                try:
                    keep, code = await self._forward(backend, head, reader, writer, extra,
                                                     request_id)
                    return keep
                except ConnectFailed as exc:
                    reason = f"machine {backend.machine_id} did not accept a connection"
                    self.metrics.upstream_errors.labels(app, "connect").inc()
                    log.info("%s: %s; trying another", app, exc)
                    # Perhaps it was just stopped and the view has not said so yet: ask its
                    # worker, so a stopped machine can be woken rather than the request fail.
                    await self.waker.refresh(backend)
                except UpstreamFailed as exc:
                    self.metrics.upstream_errors.labels(app, "reset").inc()
                    code = 502
                    await self._answer(writer, 502, app, f"machine {backend.machine_id} "
                                       f"failed: {exc}", request_id)
                    return False
                finally:
                    self.load.end(backend.machine_id)
            await self._drain_body(head, reader)
            await self._answer(writer, 503, app, f"no machine of {app} can serve right now: "
                               f"{reason}", request_id)
            code = 503
            return head.keep_alive()
        finally:
            self.metrics.observe(app, code, time.perf_counter() - began)

    async def _pick(self, app: str, tried: frozenset[str],
                    forced: bytes | None) -> tuple[Backend | None, str]:
        backends = self.table.backends(app)
        if forced is not None:
            wanted = forced.decode("latin-1")
            backends = [b for b in backends if b.machine_id == wanted]
            if not backends:
                return None, f"no machine {wanted} in {app}"
        choice = choose(backends, self.load.outstanding, self.config.region,
                        self.table.worker_alive, self.rng, tried)
        if choice.backend is not None and not choice.over_soft:
            return choice.backend, ""
        if forced is None and any(b.autostart for b in backends):
            wake = self.waker.wake(app)
            if choice.backend is not None:
                return choice.backend, ""  # over its soft limit: serve now, a new one is coming
            woken = await asyncio.shield(wake)
            if woken is not None and woken.machine_id not in tried:
                return woken, ""
        return choice.backend, choice.reason or "no stopped machine to start"

    # -- one exchange -------------------------------------------------------------------
    async def _forward(self, backend: Backend, head: Head, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter, extra: list[tuple[bytes, bytes]],
                       request_id: str) -> tuple[bool, int]:
        upgrade = head.upgrade()
        hop = ([(b"connection", b"upgrade"), (b"upgrade", head.get(b"upgrade") or b"")]
               if upgrade else [(b"connection", b"keep-alive")])
        start = Head([head.method, head.start[1], b"HTTP/1.1"], head.forwarded(extra + hop))
        has_body = head.chunked() or bool(head.content_length())
        conn = await self.upstreams.connect(backend.address)
        try:
            try:
                response = await self._send(conn, start, head, reader, has_body)
            except StaleConnection:
                conn.close()
                conn = await self.upstreams.connect(backend.address, fresh=True)
                response = await self._send(conn, start, head, reader, has_body)
        except (ConnectionError, BadMessage, asyncio.IncompleteReadError) as exc:
            conn.close()
            raise UpstreamFailed(str(exc) or type(exc).__name__) from exc
        except BaseException:
            conn.close()
            raise
        try:
            return await self._respond(conn, head, response, reader, writer, upgrade,
                                       request_id)
        except BaseException:
            conn.close()
            raise

    async def _send(self, conn: Conn, start: Head, head: Head, reader: asyncio.StreamReader,
                    has_body: bool) -> Head:
        """Send the request; the first response head that is not 100 Continue."""
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
        except (ConnectionError, BadMessage) as exc:
            if conn.reused and not has_body:
                raise StaleConnection() from exc
            raise

    async def _respond(self, conn: Conn, head: Head, response: Head,
                       reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       upgrade: bool, request_id: str) -> tuple[bool, int]:
        ids = [(b"fly-request-id", request_id.encode())]
        if upgrade and response.status == 101:
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
            self.upstreams.release(conn)
        else:
            conn.close()
        return keep, response.status

    # -- answers of our own -------------------------------------------------------------
    async def _drain_body(self, head: Head, reader: asyncio.StreamReader) -> None:
        """Read and drop a request body we will not forward, so the connection stays usable."""
        if head.chunked() or head.content_length():
            await copy_body(head, reader, _Sink())

    async def _answer(self, writer: asyncio.StreamWriter, status: int, app: str,
                      message: str, request_id: str) -> None:
        reason = {400: "Bad Request", 404: "Not Found", 502: "Bad Gateway",
                  503: "Service Unavailable"}.get(status, "Error")
        body = f"bodega: {message}\nrequest id: {request_id}\n".encode()
        writer.write(
            f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nfly-request-id: {request_id}\r\n"
            f"x-request-id: {request_id}\r\n\r\n".encode() + body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        if status >= 500:
            log.info("%s %s: %s (request %s)", app, status, message, request_id)


class RequestIds:
    """Request ids shaped like ULIDs (time first, so they sort), cheap enough for every request.

    The random part is drawn once per millisecond and then counted up, as
    monotonic ULID generators do; a full ULID per request was a noticeable
    share of the proxy's time.
    """

    def __init__(self) -> None:
        self._ms = -1
        self._counter = 0

    def next(self) -> bytes:
        ms = int(time.time() * 1000)
        if ms != self._ms:
            self._ms = ms
            self._counter = int.from_bytes(os.urandom(10), "big") >> 8
        else:
            self._counter += 1
        return _crockford((ms << 80) | (self._counter & ((1 << 80) - 1)))


_ALPHABET = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _crockford(value: int) -> bytes:
    out = bytearray(26)
    for i in range(25, -1, -1):
        out[i] = _ALPHABET[value & 31]
        value >>= 5
    return bytes(out)


class _Sink:
    """A writer that drops what it is given (for bodies of requests answered here)."""

    def write(self, data: bytes) -> None:
        return None

    async def drain(self) -> None:
        return None
