"""The worker's internal HTTP API, for brokers and proxies; cluster members only.

It listens with mutual TLS: only a certificate from the cluster's CA gets
through the handshake, and every route lets only the roles its rule in
``bodega.runtime.tls.core.access`` names (machine changes: brokers; start, stop,
suspend and reads: proxies too; metrics: the operator). This module serves the
host's routes (health, capacity, reservations, cordon, the log, metrics) and
mounts the machine, lease and volume routes of ``machine_routes``,
``lease_routes`` and ``volume_routes``, the files of a machine's statics the edge
serves (``static_routes``), and a machine's port forward and console
(WebSockets, ``forward_routes`` and ``console_routes``). Machine routes accept an optional
``app`` query parameter and answer 404 when the machine belongs to another
app, so a caller can never reach across apps by id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bodega.runtime.tls.core.access import WORKER_API
from bodega.wire.internal import worker_calls as wire
from bodega.wire.transport.http import (
    answer_response,
    json_response,
    not_found_app_handler,
    query_int,
    read_model,
    websocket_only,
)
from bodega.wire.transport.peer_access import PeerAccess
from bodega.wire.transport.routing import grouped
from bodega.worker.api.console_routes import ConsoleRoutes
from bodega.worker.api.forward_routes import ForwardRoutes, SocketSpec
from bodega.worker.api.lease_routes import LeaseRoutes
from bodega.worker.api.log_routes import LogRoutes
from bodega.worker.api.machine_routes import MachineRoutes, RouteSpec
from bodega.worker.api.memory_routes import MemoryRoutes
from bodega.worker.api.move_routes import MoveRoutes
from bodega.worker.api.static_routes import StaticRoutes
from bodega.worker.api.volume_routes import VolumeRoutes
from bodega.worker.core.records import MachineRow, ReservationRow
from bodega.worker.metrics import WorkerMetrics
from bodega.worker.ops.actions import MachineActions
from bodega.worker.ops.machines import MachineService
from bodega.worker.ops.memory import MachineMemory
from bodega.worker.ops.moves import MachineMoves
from bodega.worker.ops.snapshot_copies import SnapshotCopies
from bodega.worker.ops.static_files import StaticFiles
from bodega.worker.ops.volumes import VolumeService
from bodega.worker.store.ledger import Ledger


class RoutePart(Protocol):
    """One area's routes: (path, method, handler) each."""

    def routes(self) -> list[RouteSpec]: ...


class WorkerApi:
    def __init__(
        self,
        *,
        name: str,
        region: str,
        access: PeerAccess,
        ledger: Ledger,
        machines: MachineService,
        actions: MachineActions,
        volumes: VolumeService,
        copies: SnapshotCopies,
        metrics: WorkerMetrics,
        info: Callable[[], wire.WorkerInfo],
        service_host: Callable[[MachineRow], str | None],
        before_scrape: Callable[[], None] = lambda: None,
        more: Sequence[RoutePart] = (),
        moves: MachineMoves | None = None,
    ) -> None:
        self.name = name
        self.region = region
        self.access = access
        self.ledger = ledger
        self.machines = machines
        self.actions = actions
        self.volumes = volumes
        self.metrics = metrics
        self.info = info
        self.service_host = service_host
        self.before_scrape = before_scrape
        machine_routes = MachineRoutes(name=name, region=region, machines=machines,
                                       actions=actions, service_host=service_host)
        self.parts: tuple[RoutePart, ...] = (
            machine_routes,
            LeaseRoutes(machines=machines, actions=actions),
            MemoryRoutes(MachineMemory(machines)),
            VolumeRoutes(name=name, region=region, volumes=volumes, copies=copies),
            LogRoutes(region=region, machines=machines,
                      machine_dir=machines.effects.config.machine_dir),
            StaticRoutes(StaticFiles(machines, machines.effects.config.images_dir)),
            *more,  # the jobs' routes (docs/jobs.md)
            *(() if moves is None else (MoveRoutes(moves, machine_routes),)),
        )
        self.forward = ForwardRoutes(machines=machines, service_host=service_host)
        self.console = ConsoleRoutes(machines=machines, actions=actions)

    def app(self) -> Starlette:
        r = self._route
        routes: list[BaseRoute] = [
            r("/v1/health", self.health, "GET"),
            r("/v1/info", self.get_info, "GET"),
            r("/v1/capacity", self.capacity, "GET"),
            r("/v1/reservations", self.reserve, "POST"),
            r("/v1/reservations/{id}", self.release, "DELETE"),
            r("/v1/cordon", self.cordon_host, "POST"),
            r("/v1/uncordon", self.uncordon_host, "POST"),
            r("/v1/log", self.log, "GET"),
            *(r(path, handler, method) for part in self.parts
              for path, method, handler in part.routes()),
            # Without the upgrade, a WebSocket route's request is told what it needs
            *(r(path, websocket_only, "GET") for path, _ in self._sockets()),
            r("/metrics", self.prometheus, "GET"),
            # WebSockets last: the routes before them are grouped by their count of segments
            *(self.access.socket_route(path, handler) for path, handler in self._sockets()),
        ]
        return Starlette(routes=grouped(routes), exception_handlers={404: not_found_app_handler,
                                                            405: not_found_app_handler})

    def _sockets(self) -> list[SocketSpec]:
        return [*self.forward.sockets(), *self.console.sockets()]

    def _route(self, path: str, handler: Callable[[Request], Awaitable[Response]],
               method: str) -> Route:
        return self.access.route(path, handler, method, WORKER_API)

    # -- host -----------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        return json_response(wire.Health(ok=True, name=self.name, region=self.region).model_dump())

    async def get_info(self, request: Request) -> Response:
        return answer_response(self.info())

    async def capacity(self, request: Request) -> Response:
        return answer_response(self.ledger.snapshot().model_copy(
            update={"name": self.name, "region": self.region}))

    async def reserve(self, request: Request) -> Response:
        body = await read_model(request, wire.ReserveBody)
        ask = body.ask()

        async def reserve() -> ReservationRow:
            return self.ledger.reserve(ask, body.app, body.ttl or self.ledger.default_ttl)

        try:
            row = await self.ledger.making_room(ask, reserve)  # idle warm slots give way
        except Exception:
            self.metrics.reservations.labels("rejected").inc()
            raise
        self.metrics.reservations.labels("accepted").inc()
        answer = wire.Reservation(id=row.id, expires_at=row.expires_at, worker=self.name)
        return json_response(answer.model_dump(), 201)

    async def release(self, request: Request) -> Response:
        released = self.ledger.release(request.path_params["id"])
        return json_response(wire.Released(ok=True, released=released).model_dump())

    async def cordon_host(self, request: Request) -> Response:
        body = await read_model(request, wire.CordonBody, required=False)
        self.ledger.set_cordoned(True, body.reason)
        return json_response(wire.Cordoned(ok=True, cordoned=True,
                                           cordon_reason=body.reason).model_dump())

    async def uncordon_host(self, request: Request) -> Response:
        self.ledger.set_cordoned(False)
        return json_response(wire.Cordoned(ok=True, cordoned=False).model_dump())

    async def log(self, request: Request) -> Response:
        entries = self.machines.store.history(request.query_params.get("resource"),
                                              query_int(request, "limit", 200))
        return json_response([entry.__dict__ for entry in entries])

    async def prometheus(self, request: Request) -> Response:
        self.before_scrape()
        return Response(generate_latest(self.metrics.registry),
                        media_type="text/plain; version=0.0.4")

