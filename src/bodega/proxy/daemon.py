"""A running proxy: its registry node, the routing table it keeps, and two listeners.

The public listener speaks HTTP/1.1 to clients (``--listen``); the admin
listener is mutual TLS, for the cluster only: ``/v1/health`` to any member,
the registry's sync routes to members, ``/metrics`` and ``/v1/routes`` to the
operator's certificate (they name apps, machines and their addresses). Its
calls to workers (wake, autostop) present its own certificate. The routing
table follows the registry: machine and app rows by subscription, worker
liveness by membership events, so a machine that starts, stops or loses its
worker changes the routes within one gossip.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from bodega.model.rows import WorkerRow
from bodega.model.rows.apps import org_reader
from bodega.proxy.autostop import Autostop, Failover
from bodega.proxy.core.balance import usable
from bodega.proxy.core.load import Load, LoadView
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.sites import SiteStore
from bodega.proxy.core.statics import StaticsTable
from bodega.proxy.core.tcp_routes import AllServices, TcpTable
from bodega.proxy.figures import AppFigures, Place
from bodega.proxy.haproxy.dataplane import HaproxyDataPlane
from bodega.proxy.haproxy.observed import CombinedLoad
from bodega.proxy.haproxy.tcp_plane import TcpPlane
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.plane import choose_plane, give_back_workdir, haproxy_settings, take_workdir
from bodega.proxy.server import ProxyConfig, ProxyServer
from bodega.proxy.tcp_activator import TcpActivator
from bodega.proxy.upstream import Upstreams
from bodega.proxy.view_feed import TABLES, follow
from bodega.proxy.wake import Waker
from bodega.registry import Registry, RegistryConfig, open_registry
from bodega.registry.agent.member_tls import certificate_meta, renewal
from bodega.registry.membership.feed import FeedLagged
from bodega.registry.sealing.keyfile import KeyringSource, needed
from bodega.runtime.secretbox import SecretBox
from bodega.runtime.serve import Served, bind, serve
from bodega.runtime.tls.contexts import InternalTls
from bodega.runtime.tls.core.access import PROXY_ADMIN
from bodega.runtime.tls.files import TlsDir
from bodega.runtime.waits import within
from bodega.wire.internal.worker_client import WorkerClient
from bodega.wire.transport.aiohttp_transport import session
from bodega.wire.transport.http import json_response, not_found_app_handler
from bodega.wire.transport.peer_access import PeerAccess

log = logging.getLogger("bodega.proxy")
GONE = ("dead", "left")  # a suspect worker may come back; these statuses end its generation


@dataclass(frozen=True)
class ProxyDaemonConfig:
    name: str
    region: str
    data_dir: Path
    tls_dir: Path | None = None  # mutual TLS material; None: plain (measurement only)
    listen_host: str = "127.0.0.1"
    listen_port: int = 8080
    admin_host: str = "127.0.0.1"
    admin_port: int = 0
    gossip_host: str | None = None
    gossip_port: int = 0
    seeds: tuple[str, ...] = ()
    gossip_keyring: KeyringSource | None = None  # required: the proxy gossips
    registry_agent: Path | None = None  # the host's registry agent's data dir (None: our own)
    base_domain: str = "localhost"
    autostop_interval: float = 60.0
    autostop_idle: float = 60.0
    ready_timeout: float = 30.0
    data_plane: str = "auto"  # auto, haproxy or python: see bodega.proxy.plane
    haproxy_threads: int = 1
    tls_host: str = "127.0.0.1"
    tls_port: int | None = None  # the TLS listener (HAProxy only); None: none
    tls_cert: Path | None = None  # its default key + chain; None: self-signed *.<base-domain>
    certs_key: str = ""  # opens the keys of the certificates' rows


class Proxy:
    def __init__(self, config: ProxyDaemonConfig) -> None:
        self.config = config
        self.plane = choose_plane(config.data_plane, tls=config.tls_port is not None)
        self.metrics = ProxyMetrics()
        self.table = RoutingTable()
        self.statics = StaticsTable()  # the apps' files the edge serves from their images
        self.load = Load()
        self.upstreams = Upstreams()
        self.tls = (InternalTls(TlsDir(config.tls_dir), self.metrics.registry)
                    if config.tls_dir is not None else None)
        self._session = session(ssl=self.tls.client if self.tls else None)
        self._clients: dict[str, WorkerClient] = {}
        self.waker = Waker(self.table, self.client, self.load, self.metrics, config.region,
                           config.ready_timeout)
        self.failover = Failover(self.table, self.waker, self.metrics)
        self.sites = SiteStore(SecretBox(config.certs_key) if config.certs_key else None,
                               self.table)
        self.tls_public: tuple[str, int] | None = None  # HAProxy's TLS address, when it serves
        self.tcp = TcpTable()  # [[services]] ports beyond HTTP's (HAProxy only), and their waker:
        self.tcp_activator = TcpActivator(self.tcp, self.table, self.waker, config.region)
        self.dataplane: HaproxyDataPlane | None = None
        self.public: tuple[str, int] | None = None  # HAProxy's address, when it serves
        self._haproxy_dir: Path | None = None
        self.server = ProxyServer(ProxyConfig(config.region, config.base_domain,
                                              behind_data_plane=self.plane.binary is not None),
                                  self.table,
                                  self.upstreams, self.waker, self.load, self.metrics,
                                  statics=self.statics)
        self.node: Registry | None = None
        self.figures = self.server.figures = AppFigures(
            self._places, lambda app: org_reader(self.node)(app), (config.region, config.name),
            lambda: self.load.outstanding)
        self.metrics.registry.register(self.figures)
        self.admin: Served | None = None
        self.listener: asyncio.Server | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._background: set[asyncio.Task[Any]] = set()

    def _places(self) -> dict[str, Place]:
        """Each machine the proxy knows of: its app, region and host (its worker), and
        whether it routes new requests to it."""
        alive = self.table.worker_alive
        places = {b.machine_id: Place(b.app, b.region, b.worker, usable(b, alive))
                  for app in self.tcp.apps() for b in self.tcp.machines(app)}
        places.update({b.machine_id: Place(b.app, b.region, b.worker, usable(b, alive))
                       for app in self.table.apps() for b in self.table.backends(app)})
        return places

    @property
    def url(self) -> str:
        if self.public is not None:
            return f"http://{self.public[0]}:{self.public[1]}"
        assert self.listener is not None
        host, port = self.listener.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    def client(self, worker: str) -> WorkerClient | None:
        """A client for ``worker``'s internal API, at the address the view publishes."""
        assert self.node is not None
        row = self.node.get(WorkerRow, worker)
        url = row.url if row is not None else ""
        if not url:
            return None
        client = self._clients.get(url)
        if client is None:
            client = WorkerClient(url, client=self._session, timeout=30)
            self._clients[url] = client
        return client

    async def start(self) -> None:
        config = self.config
        sock = bind(config.admin_host, config.admin_port)
        scheme = "https" if self.tls else "http"
        admin_url = f"{scheme}://{config.admin_host}:{sock.getsockname()[1]}"
        keys = needed(config.gossip_keyring)
        self.node = await open_registry(RegistryConfig(
            name=config.name, role="proxy", region=config.region, data_dir=config.data_dir,
            keyring=keys.keyring, keyring_file=keys.file,
            bind_host=config.gossip_host or config.admin_host, bind_port=config.gossip_port,
            seeds=config.seeds, meta={"url": admin_url, **certificate_meta(self.tls)}),
            config.registry_agent,
            registry=self.metrics.registry,  # gossip counters (bad packets too) in /metrics
            tls=self.tls)
        access = PeerAccess(PROXY_ADMIN, self.tls)
        app = Starlette(routes=[access.route("/v1/health", self._health, "GET"),
                                access.route("/metrics", self._metrics, "GET"),
                                access.route("/v1/routes", self._routes, "GET"),
                                *self.node.routes()],
                        exception_handlers={404: not_found_app_handler,
                                            405: not_found_app_handler})
        self.admin = await serve(app, config.admin_host, 0, sock=sock, tls=self.tls)
        await self.node.start()
        if self.tls is not None:
            self._tasks.append(asyncio.create_task(renewal(self.tls, self.node).run()))
        self._tasks += [asyncio.create_task(follow(self.node, table, self.table, self.tcp,
                                                   self.sites, self.statics))
                        for table in TABLES]
        self._tasks.append(asyncio.create_task(self._follow_members()))
        load: LoadView = self.load
        if self.plane.binary is not None:
            load = await self._start_haproxy(self.plane.binary)
            log.info("data plane: haproxy (%s) on %s; bodega's proxy is its control plane "
                     "and activates sleeping apps on %s", self.plane.why, self.url,
                     self._activator_url)
        else:
            self.listener = await asyncio.start_server(self.server.handle, config.listen_host,
                                                       config.listen_port, backlog=2048,
                                                       reuse_address=True)
            log.info("data plane: python (%s): every request goes through this process",
                     self.plane.why)
        autostop = Autostop(AllServices(self.table, self.tcp), load, self.client, self.metrics,
                            config.region, config.autostop_interval, config.autostop_idle)
        self._tasks.append(asyncio.create_task(autostop.run()))
        log.info("proxy %s (%s) serving *.%s on %s%s, admin on %s", config.name,
                 config.region, config.base_domain, self.url,
                 f" and {self.tls_url}" if self.tls_url else "", admin_url)

    @property
    def tls_url(self) -> str | None:
        return f"https://{self.tls_public[0]}:{self.tls_public[1]}" if self.tls_public else None

    @property
    def _activator_url(self) -> str:
        assert self.listener is not None
        host, port = self.listener.sockets[0].getsockname()[:2]
        return f"http://{host}:{port}"

    async def _start_haproxy(self, binary: str) -> LoadView:
        """HAProxy on the public port; this process listens on loopback as its activator."""
        config = self.config
        self.listener = await asyncio.start_server(self.server.handle, "127.0.0.1", 0,
                                                   backlog=2048)
        activator = self.listener.sockets[0].getsockname()[:2]
        tls = (config.tls_host, config.tls_port) if config.tls_port is not None else None
        workdir, settings = haproxy_settings(config.listen_host, config.listen_port, activator,
                                             config.base_domain, config.haproxy_threads,
                                             region=config.region, tls=tls,
                                             default_cert=config.tls_cert)
        self._haproxy_dir = workdir
        self.dataplane = HaproxyDataPlane(binary, workdir, settings, self.table, config.region,
                                          self.waker, self.sites,
                                          TcpPlane(self.tcp, self.tcp_activator, self.table,
                                                   config.region, config.listen_host),
                                          self.statics)
        try:
            take_workdir(config.data_dir, workdir)
            await self.dataplane.start()
        except BaseException:
            give_back_workdir(config.data_dir, workdir)  # stop() is not called after a failed start
            raise
        self.public = (settings.bind_host, settings.bind_port)
        self.tls_public = (settings.tls_host, settings.tls_port) if settings.tls_port else None
        self.metrics.registry.register(self.dataplane.collector)
        self.dataplane.figures = self.figures
        return CombinedLoad(self.load, self.dataplane.load)

    async def _follow_members(self) -> None:
        assert self.node is not None
        while True:
            try:
                for member in self.node.members():
                    self.table.set_worker(member.name, str(member.status))
                with self.node.membership.events() as feed:
                    async for event in feed:
                        member = event.member
                        was_gone = self.table.worker_status(member.name) in GONE
                        self.table.set_worker(member.name, str(member.status))
                        if not was_gone and str(member.status) in GONE:
                            for backend in self.table.on_worker(member.name):
                                self.upstreams.forget(backend.address)
                            task = asyncio.create_task(self.failover.worker_lost(member.name))
                            self._background.add(task)
                            task.add_done_callback(self._background.discard)
            except FeedLagged:
                log.warning("fell behind membership events; reading members again")
            except asyncio.CancelledError:
                raise

    async def _health(self, request: Request) -> Response:
        return json_response({"ok": True, "name": self.config.name})

    async def _routes(self, request: Request) -> Response:
        """The routing table as this proxy sees it."""
        return json_response({app: [{
            "machine_id": b.machine_id, "state": b.state, "region": b.region,
            "worker": b.worker, "worker_alive": self.table.worker_alive(b.worker),
            "address": f"{b.host}:{b.port}", "cordoned": b.cordoned,
            "outstanding": self.load.outstanding.get(b.machine_id, 0),
        } for b in self.table.backends(app)] for app in self.table.apps()})

    async def _metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.metrics.registry),
                        media_type="text/plain; version=0.0.4")

    async def stop(self) -> None:
        if self.dataplane is not None:
            await self.dataplane.stop()
            await self.tcp_activator.close()
            if self._haproxy_dir is not None:
                give_back_workdir(self.config.data_dir, self._haproxy_dir)
        if self.listener is not None:
            self.listener.close()
            with contextlib.suppress(Exception):
                await within(self.listener.wait_closed(), 5)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.upstreams.close()
        if self.admin is not None:
            await self.admin.stop()
        if self.node is not None:
            await self.node.stop()
        await self._session.close()
