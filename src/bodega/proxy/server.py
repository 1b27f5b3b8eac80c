"""The proxy's request path: pick a machine by Host, forward, stream back, keep connections.

    client ─ head ─▶ app from Host ─▶ choose (nearest with room, bands, least outstanding)
                                          │ nothing / all over soft limit
                                          ▼
                                        wake (one start per app, wait for the port)
              ◀─ response streamed ─── forward to machine ── connect refused or unanswered?
                                                              next machine, or, if none and
                                                              its worker says started, wait
                                                              for the port it refused on;
                                                              request unacknowledged (its
                                                              host gone)? next machine if
                                                              it may be sent twice, else 502

Bodies are streamed both ways, never buffered; ``Upgrade`` (WebSocket)
becomes a two-way pipe. Every request gets ``X-Forwarded-For``,
``X-Forwarded-Proto`` and a request id (``fly-request-id`` and
``x-request-id``, kept if the client sent one). Errors the proxy itself
answers are plain text with the request id, so they can be found in logs.
One exchange with a machine (send, relay, pool the connection) is
``exchange.py``; this module chooses the machine and retries the next. A
``GET`` or ``HEAD`` under one of the app's static prefixes never reaches a
machine: ``statics.py`` answers it from a worker holding the app's image.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass

from bodega.model.ids import new_ulid
from bodega.model.statics import Refuse, request_path
from bodega.proxy.core.balance import choose, usable
from bodega.proxy.core.load import Load
from bodega.proxy.core.replay import (
    INSTRUCTION,
    SOURCE,
    ReplayTo,
    candidates,
    parse_replay,
    source_header,
    source_of,
)
from bodega.proxy.core.routes import PATIENT_CONNECT_TIMEOUT, Backend, RoutingTable
from bodega.proxy.core.statics import Lookup, StaticsTable
from bodega.proxy.exchange import HostSilent, UpstreamFailed, exchange, resendable
from bodega.proxy.figures import AppFigures
from bodega.proxy.http1 import (
    BadMessage,
    Head,
    copy_body,
    read_head,
)
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.request_ids import RequestIds
from bodega.proxy.statics import METHODS as STATIC_METHODS
from bodega.proxy.statics import StaticServer
from bodega.proxy.upstream import ConnectFailed, Upstreams
from bodega.proxy.wake import Waker

log = logging.getLogger("bodega.proxy")

MAX_TRIES = 3
CLIENT_IDLE = 60.0
# A machine whose connect went unanswered (its host stopped answering) is passed over this
# long while another can serve, as HAProxy marks such a server down and checks it again
# every second: later requests do not each wait for the connect timeout.
UNANSWERED_SECONDS = 1.0
FORCE_INSTANCE = b"fly-force-instance-id"
PREFER_REGION = b"fly-prefer-region"


@dataclass(frozen=True)
class ProxyConfig:
    region: str
    base_domain: str = "localhost"
    # Behind HAProxy (the activator): it already set X-Forwarded-* and the request id, and the
    # client's address is in them, not in this connection's peer.
    behind_data_plane: bool = False


class ProxyServer:
    def __init__(self, config: ProxyConfig, table: RoutingTable, upstreams: Upstreams,
                 waker: Waker, load: Load, metrics: ProxyMetrics,
                 rng: random.Random | None = None, statics: StaticsTable | None = None,
                 static_files: StaticServer | None = None) -> None:
        self.config = config
        self.table = table
        self.statics = statics or StaticsTable()
        self.static_files = static_files or StaticServer(waker.clients)
        self.upstreams = upstreams
        self.waker = waker
        self.load = load
        self.metrics = metrics
        self.rng = rng or random.Random()
        self.ids = RequestIds()
        self._suffix = "." + config.base_domain.strip(".").lower()
        self._unanswered: dict[str, float] = {}  # machine -> until when it is passed over
        self.figures: AppFigures | None = None  # the fly_app_* series of what it answers

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
        name = self.table.app_for_hostname(name) or name
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
        if (lookup := self._static(app, head)) is not None:
            return await self._serve_static(app, lookup, head, reader, writer, request_id,
                                            began)
        forwarded = head.get(b"x-forwarded-for")
        extra = [] if self.config.behind_data_plane else [
            (b"x-forwarded-for", (forwarded + b", " if forwarded else b"") + client_ip.encode()),
            (b"x-forwarded-proto", b"http"), (b"x-request-id", request_id.encode()),
            (b"fly-request-id", request_id.encode()),
        ]
        only = None
        if self.config.behind_data_plane and (instruction := head.get(INSTRUCTION)):
            app, only, src = self._replay(app, parse_replay(instruction.decode("latin-1")))
            extra.append((SOURCE, src))
        extra_names = {k for k, _ in extra} | {INSTRUCTION}
        head.headers = [(k, v) for k, v in head.headers if k.lower() not in extra_names]
        forced = head.get(FORCE_INSTANCE)
        # Fly-Prefer-Region: that region's machines first, the nearest ones when it has none.
        region = (head.get(PREFER_REGION) or b"").decode("latin-1") or self.config.region
        tried: set[str] = set()
        refused: set[str] = set()
        code = 503
        reason = "no machine can serve"
        answered: str | None = None  # the machine whose answer (or failure) the client got
        try:
            for _ in range(MAX_TRIES):
                backend, reason = await self._pick(app, frozenset(tried), frozenset(refused),
                                                   forced, only, region)
                if backend is None:
                    break
                tried.add(backend.machine_id)
                # Giving up on a connect soon pays only when another machine can take the
                # request; the last one left gets the time its SYN needs to be sent again.
                alone = self._alone(self._pool(app, forced, only), frozenset(tried))
                self.load.begin(backend.machine_id)
                answered = backend.machine_id
                try:
                    keep, code = await exchange(
                        self.upstreams, backend, head, reader, writer, extra, request_id,
                        connect_timeout=PATIENT_CONNECT_TIMEOUT if alone else None)
                    return keep
                except ConnectFailed as exc:
                    answered = None
                    reason = f"machine {backend.machine_id} did not accept a connection"
                    self.metrics.upstream_errors.labels(app, "connect").inc()
                    log.info("%s: %s; trying another", app, exc)
                    if exc.refused:
                        # Perhaps it was just stopped and the view has not said so yet: ask
                        # its worker, so a stopped machine can be woken rather than the
                        # request fail.
                        refused.add(backend.machine_id)
                        await self.waker.refresh(backend)
                    else:
                        # Its host did not answer: its worker, most likely behind the same
                        # link, is not asked (the request would wait on that too).
                        self._pass_over(backend)
                except HostSilent as exc:
                    self.metrics.upstream_errors.labels(app, "silent").inc()
                    self._pass_over(backend)
                    if not resendable(head):
                        code = 502
                        await self._answer(writer, 502, app, f"machine {backend.machine_id}'s "
                                           "host stopped answering, and the request may have "
                                           "reached it: not sent again", request_id)
                        return False
                    reason = f"machine {backend.machine_id}'s host stopped answering"
                    answered = None
                    log.info("%s: %s; trying another", app, exc)
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
            if self.figures is not None:
                self.figures.observe_request(app, answered, code, time.perf_counter() - began)

    def _static(self, app: str, head: Head) -> tuple[str, Lookup] | None:
        """The path and what the statics table says of it, when the request is the edge's
        to answer from the app's images (``statics.py``)."""
        if not self.statics.serves(app) or head.method not in STATIC_METHODS \
                or head.get(INSTRUCTION) is not None:
            return None
        path = request_path(head.start[1].decode("latin-1"))
        lookup = self.statics.lookup(app, path, self.table.worker_alive) if path else None
        return (path, lookup) if path and lookup is not None else None

    async def _serve_static(self, app: str, static: tuple[str, Lookup], head: Head,
                            reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            request_id: str, began: float) -> bool:
        """Answer from a worker holding the app's image; no machine is woken or counted."""
        path, lookup = static
        code = 404
        try:
            await self._drain_body(head, reader)
            if isinstance(lookup.found, Refuse):
                await self._answer(writer, 404, app, f"{path!r} names no static file: "
                                   f"{lookup.found.reason}", request_id)
                return head.keep_alive()
            keep, code, why = await self.static_files.answer(lookup, path, head, writer,
                                                             request_id)
            if why:  # nothing was written: no worker answered
                await self._answer(writer, 503, app, f"no static file of {app} can be "
                                   f"served right now: {why}", request_id)
            return keep
        finally:
            self.metrics.observe(app, code, time.perf_counter() - began)
            if self.figures is not None:
                self.figures.observe_request(app, None, code, time.perf_counter() - began)

    def _replay(self, app: str, replay: ReplayTo) -> tuple[str, list[Backend], bytes]:
        """A request HAProxy hands over for fly-replay: the target app, the machines it may
        go to, and the ``fly-replay-src`` header they get."""
        source = source_of(replay, self.table.backends(app))
        target = replay.app or app
        pool = candidates(replay, self.table.backends(target), source)
        log.info("%s: fly-replay (%s) from %s to %d candidate(s) in %s", app, replay,
                 source.machine_id if source else "?", len(pool), target)
        return target, pool, source_header(replay, source)

    def _pass_over(self, backend: Backend) -> None:
        """A machine whose host did not answer: passed over for ``UNANSWERED_SECONDS`` while
        another can serve, and its idle connections closed (they cross the same link, and a
        request sent on one would wait to be given up too)."""
        self._unanswered[backend.machine_id] = time.monotonic() + UNANSWERED_SECONDS
        self.upstreams.forget(backend.address)

    def _pool(self, app: str, forced: bytes | None,
              only: list[Backend] | None) -> list[Backend]:
        """The machines this request may go to: a replay's, the one it forces, or the app's."""
        if only is not None:
            return only
        backends = self.table.backends(app)
        if forced is None:
            return backends
        return [b for b in backends if b.machine_id == forced.decode("latin-1")]

    def _alone(self, pool: list[Backend], tried: frozenset[str]) -> bool:
        """Whether no machine but those tried could take the request now."""
        return choose(pool, self.load.outstanding, self.config.region,
                      self.table.worker_alive, self.rng, self._passed_over(tried)).backend is None

    def _passed_over(self, tried: frozenset[str]) -> frozenset[str]:
        """The machines not to try now: those tried, and those whose connect went
        unanswered a moment ago."""
        now = time.monotonic()
        for machine_id in [m for m, until in self._unanswered.items() if until <= now]:
            del self._unanswered[machine_id]
        return tried | self._unanswered.keys()

    async def _pick(self, app: str, tried: frozenset[str], refused: frozenset[str],
                    forced: bytes | None, only: list[Backend] | None,
                    region: str) -> tuple[Backend | None, str]:
        if only is not None:  # a replay: one of these, running, or none
            choice = choose(only, self.load.outstanding, region,
                            self.table.worker_alive, self.rng, tried)
            if choice.backend is None:
                return None, f"no machine the fly-replay names can serve ({choice.reason})"
            return choice.backend, ""
        backends = self._pool(app, forced, None)
        if forced is not None and not backends:
            return None, f"no machine {forced.decode('latin-1')} in {app}"
        if not any(b.region == region and usable(b, self.table.worker_alive)
                   for b in backends):
            region = self.config.region  # none where preferred: the nearest, as always
        choice = choose(backends, self.load.outstanding, region, self.table.worker_alive,
                        self.rng, self._passed_over(tried))
        if choice.backend is None and self._unanswered:
            # Only machines that did not answer a moment ago are left: one may answer now.
            choice = choose(backends, self.load.outstanding, region, self.table.worker_alive,
                            self.rng, tried)
        if choice.backend is not None and not choice.over_soft:
            return choice.backend, ""
        if choice.backend is None:
            # One refused this request, yet its worker still says started: its program is
            # still binding its port (just started, or restarted). Waiting for it beats
            # waking another machine or a 503.
            binding = next((b for b in backends if b.machine_id in refused
                            and usable(b, self.table.worker_alive)), None)
            if binding is not None and await self.waker.bound(binding, self.upstreams):
                return binding, ""
        if forced is None and any(b.autostart for b in backends):
            wake = self.waker.wake(app, self.upstreams)
            if choice.backend is not None:
                return choice.backend, ""  # over its soft limit: serve now, a new one is coming
            woken = await asyncio.shield(wake)
            if woken is not None:  # accepting now, even one tried before it was stopped
                return woken, ""
        return choice.backend, choice.reason or "no stopped machine to start"

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


class _Sink:
    """A writer that drops what it is given (for bodies of requests answered here)."""

    def write(self, data: bytes) -> None:
        return None

    async def drain(self) -> None:
        return None
