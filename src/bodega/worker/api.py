"""The worker's internal HTTP API, for brokers and proxies; cluster members only.

Every route but ``/v1/health`` needs the cluster token. Machine routes accept
an optional ``app`` query parameter and answer 404 when the machine belongs
to another app, so a caller can never reach across apps by id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.api import worker_wire as wire
from bodega.api.http import (
    check_cluster_token,
    handle_errors,
    json_response,
    not_found_app_handler,
    query_bool,
    query_int,
    read_model,
)
from bodega.model.capacity import Ask
from bodega.model.duration import parse_duration
from bodega.model.errors import BadRequest, NotFound
from bodega.worker import tables
from bodega.worker.actions import MachineActions, parse_wait_states
from bodega.worker.ledger import Ledger
from bodega.worker.machines import CreateRequest, MachineService
from bodega.worker.metrics import WorkerMetrics
from bodega.worker.records import MachineRow
from bodega.worker.render import machine_wire, volume_wire
from bodega.worker.volumes import VolumeRequest, VolumeService

NONCE_HEADER = "fly-machine-lease-nonce"


class WorkerApi:
    def __init__(
        self,
        *,
        name: str,
        region: str,
        token: str,
        ledger: Ledger,
        machines: MachineService,
        actions: MachineActions,
        volumes: VolumeService,
        metrics: WorkerMetrics,
        info: Callable[[], dict[str, Any]],
        service_host: Callable[[MachineRow], str | None],
        before_scrape: Callable[[], None] = lambda: None,
    ) -> None:
        self.name = name
        self.region = region
        self.token = token
        self.ledger = ledger
        self.machines = machines
        self.actions = actions
        self.volumes = volumes
        self.metrics = metrics
        self.info = info
        self.service_host = service_host
        self.before_scrape = before_scrape

    def app(self) -> Starlette:
        r = self._route
        routes = [
            Route("/v1/health", self.health, methods=["GET"]),
            r("/v1/info", self.get_info, "GET"),
            r("/v1/capacity", self.capacity, "GET"),
            r("/v1/reservations", self.reserve, "POST"),
            r("/v1/reservations/{id}", self.release, "DELETE"),
            r("/v1/cordon", self.cordon_host, "POST"),
            r("/v1/uncordon", self.uncordon_host, "POST"),
            r("/v1/log", self.log, "GET"),
            r("/v1/machines", self.list_machines, "GET"),
            r("/v1/machines", self.create_machine, "POST"),
            r("/v1/machines/{id}", self.get_machine, "GET"),
            r("/v1/machines/{id}", self.update_machine, "POST"),
            r("/v1/machines/{id}", self.destroy_machine, "DELETE"),
            r("/v1/machines/{id}/start", self.start, "POST"),
            r("/v1/machines/{id}/stop", self.stop, "POST"),
            r("/v1/machines/{id}/restart", self.restart, "POST"),
            r("/v1/machines/{id}/signal", self.signal, "POST"),
            r("/v1/machines/{id}/suspend", self.suspend, "POST"),
            r("/v1/machines/{id}/cordon", self.cordon, "POST"),
            r("/v1/machines/{id}/uncordon", self.uncordon, "POST"),
            r("/v1/machines/{id}/exec", self.exec, "POST"),
            r("/v1/machines/{id}/ps", self.ps, "GET"),
            r("/v1/machines/{id}/wait", self.wait, "GET"),
            r("/v1/machines/{id}/events", self.events, "GET"),
            r("/v1/machines/{id}/versions", self.versions, "GET"),
            r("/v1/machines/{id}/placement", self.placement, "GET"),
            r("/v1/machines/{id}/lease", self.get_lease, "GET"),
            r("/v1/machines/{id}/lease", self.acquire_lease, "POST"),
            r("/v1/machines/{id}/lease", self.release_lease, "DELETE"),
            r("/v1/machines/{id}/metadata", self.get_metadata, "GET"),
            r("/v1/machines/{id}/metadata", self.replace_metadata, "PUT"),
            r("/v1/machines/{id}/metadata", self.replace_metadata, "PATCH"),
            r("/v1/machines/{id}/metadata/{key}", self.get_metadata_key, "GET"),
            r("/v1/machines/{id}/metadata/{key}", self.set_metadata_key, "POST"),
            r("/v1/machines/{id}/metadata/{key}", self.delete_metadata_key, "DELETE"),
            r("/v1/volumes", self.list_volumes, "GET"),
            r("/v1/volumes", self.create_volume, "POST"),
            r("/v1/volumes/{id}", self.get_volume, "GET"),
            r("/v1/volumes/{id}", self.update_volume, "PUT"),
            r("/v1/volumes/{id}", self.delete_volume, "DELETE"),
            r("/v1/volumes/{id}/extend", self.extend_volume, "PUT"),
            r("/metrics", self.prometheus, "GET"),
        ]
        return Starlette(routes=routes, exception_handlers={404: not_found_app_handler,
                                                            405: not_found_app_handler})

    def _route(self, path: str, handler: Callable[[Request], Awaitable[Response]],
               method: str) -> Route:
        async def authed(request: Request) -> Response:
            check_cluster_token(request, self.token)
            return await handler(request)

        async def endpoint(request: Request) -> Response:
            return await handle_errors(request, authed)

        return Route(path, endpoint, methods=[method], name=f"{method} {path}")

    # -- helpers --------------------------------------------------------------------------
    def _machine(self, request: Request) -> MachineRow:
        row = self.machines.get(request.path_params["id"])
        app = request.query_params.get("app")
        if app is not None and row.app != app:
            raise NotFound(f"machine not found: {row.id}")
        return row

    def _wire(self, row: MachineRow, *, events: bool = True, nonce: str | None = None
              ) -> dict[str, Any]:
        return machine_wire(
            row, worker=self.name,
            events=self.machines.store.events(row.id, 20) if events else None,
            nonce=nonce, service_host=self.service_host(row),
        )

    @staticmethod
    def _nonce(request: Request) -> str | None:
        return request.headers.get(NONCE_HEADER)

    # -- host -----------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        return json_response({"ok": True, "name": self.name, "region": self.region})

    async def get_info(self, request: Request) -> Response:
        return json_response(self.info())

    async def capacity(self, request: Request) -> Response:
        return json_response({"name": self.name, "region": self.region, **self.ledger.snapshot()})

    async def reserve(self, request: Request) -> Response:
        body = await read_model(request, wire.ReserveBody)
        ask = Ask(cpu_kind=body.cpu_kind, cpus=body.cpus, memory_mb=body.memory_mb,
                  disk_gb=body.disk_gb, gpus=body.gpus, gpu_kind=body.gpu_kind)
        try:
            row = self.ledger.reserve(ask, body.app, body.ttl or self.ledger.default_ttl)
        except Exception:
            self.metrics.reservations.labels("rejected").inc()
            raise
        self.metrics.reservations.labels("accepted").inc()
        return json_response({"id": row.id, "expires_at": row.expires_at,
                              "worker": self.name}, 201)

    async def release(self, request: Request) -> Response:
        released = self.ledger.release(request.path_params["id"])
        return json_response({"ok": True, "released": released})

    async def cordon_host(self, request: Request) -> Response:
        self.ledger.set_cordoned(True)
        return json_response({"ok": True, "cordoned": True})

    async def uncordon_host(self, request: Request) -> Response:
        self.ledger.set_cordoned(False)
        return json_response({"ok": True, "cordoned": False})

    async def log(self, request: Request) -> Response:
        entries = self.machines.store.history(request.query_params.get("resource"),
                                              query_int(request, "limit", 200))
        return json_response([entry.__dict__ for entry in entries])

    # -- machines -------------------------------------------------------------------------
    async def list_machines(self, request: Request) -> Response:
        rows = tables.list_machines(self.machines.store.db, request.query_params.get("app"),
                                    query_bool(request, "include_deleted"))
        return json_response([self._wire(row, events=False) for row in rows])

    async def create_machine(self, request: Request) -> Response:
        body = await read_model(request, wire.CreateMachineBody)
        row, nonce = await self.machines.create(
            CreateRequest(
                app=body.app, config=body.config, region=self.region, name=body.name,
                generated_name=body.generated_name,
                machine_id=body.machine_id, reservation_id=body.reservation_id,
                skip_launch=body.skip_launch,
                skip_service_registration=body.skip_service_registration,
                lease_ttl=body.lease_ttl, idempotency_key=body.idempotency_key,
                placement=body.placement, owner=request.headers.get("x-bodega-owner", "bodega"),
            )
        )
        return json_response(self._wire(row, nonce=nonce))

    async def get_machine(self, request: Request) -> Response:
        return json_response(self._wire(self._machine(request)))

    async def update_machine(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.UpdateMachineBody)
        updated = await self.machines.update(
            row.id, body.config, nonce=self._nonce(request),
            current_version=body.current_version, skip_launch=body.skip_launch,
            name=body.name, region=body.region,
        )
        return json_response(self._wire(updated))

    async def destroy_machine(self, request: Request) -> Response:
        row = self._machine(request)
        await self.machines.destroy(row.id, self._nonce(request),
                                    force=query_bool(request, "force", "kill"),
                                    lease_override=query_bool(request, "lease_override"))
        return json_response({"ok": True})

    async def start(self, request: Request) -> Response:
        row = self._machine(request)
        return json_response(await self.machines.start(row.id, self._nonce(request)))

    async def stop(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.StopBody, required=False)
        timeout = _seconds(body.timeout)
        await self.machines.stop(row.id, self._nonce(request), body.signal, timeout)
        return json_response({"ok": True})

    async def restart(self, request: Request) -> Response:
        row = self._machine(request)
        timeout = _seconds(request.query_params.get("timeout"))
        await self.machines.restart(row.id, self._nonce(request),
                                    request.query_params.get("signal"), timeout)
        return json_response({"ok": True})

    async def signal(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.SignalBody)
        await self.actions.signal(row.id, body.signal)
        return json_response({"ok": True})

    async def suspend(self, request: Request) -> Response:
        self._machine(request)
        raise BadRequest("unimplemented: suspend is not supported by this worker's driver; "
                         "use stop", status="unimplemented")

    async def cordon(self, request: Request) -> Response:
        self.actions.cordon(self._machine(request).id, True, self._nonce(request))
        return json_response({"ok": True})

    async def uncordon(self, request: Request) -> Response:
        self.actions.cordon(self._machine(request).id, False, self._nonce(request))
        return json_response({"ok": True})

    async def exec(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.ExecBody)
        command = body.command or (body.cmd.split() if body.cmd else [])
        result = await self.actions.exec(row.id, command, float(body.timeout), body.stdin,
                                         self._nonce(request))
        return json_response(result.to_wire())

    async def ps(self, request: Request) -> Response:
        processes = await self.actions.ps(self._machine(request).id)
        return json_response([p.to_wire() for p in processes])

    async def wait(self, request: Request) -> Response:
        row = self._machine(request)
        states = parse_wait_states(request.query_params.getlist("state"))
        version = request.query_params.get("version") or request.query_params.get("instance_id")
        body = await self.actions.wait(
            row.id, states, query_int(request, "timeout", 60), version,
            request.query_params.get("from_event_id"),
        )
        return json_response(body)

    async def events(self, request: Request) -> Response:
        row = self._machine(request)
        return json_response(self.actions.events(row.id, query_int(request, "limit", 20)))

    async def versions(self, request: Request) -> Response:
        return json_response(self.actions.versions(self._machine(request).id))

    async def placement(self, request: Request) -> Response:
        row = self._machine(request)
        if row.placement is None:
            raise NotFound(f"no placement record for machine {row.id}")
        return json_response(row.placement)

    # -- leases and metadata ----------------------------------------------------------------
    async def get_lease(self, request: Request) -> Response:
        lease = self.actions.lease(self._machine(request).id)
        return json_response({"status": "success", "data": lease.to_wire()})

    async def acquire_lease(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.LeaseBody, required=False)
        ttl = body.ttl or query_int(request, "ttl", 30)
        lease = self.actions.acquire_lease(row.id, ttl, body.description,
                                           request.headers.get("x-bodega-owner", "bodega"),
                                           self._nonce(request))
        return json_response({"status": "success", "data": lease.to_wire()})

    async def release_lease(self, request: Request) -> Response:
        self.actions.release_lease(self._machine(request).id, self._nonce(request))
        return json_response({"status": "success", "data": {"ok": True}})

    async def get_metadata(self, request: Request) -> Response:
        return json_response(self.actions.metadata(self._machine(request).id))

    async def replace_metadata(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.MetadataBody)
        changes: dict[str, str | None] = dict(body.metadata)
        if request.method == "PUT":
            for key in (row.config.metadata or {}):
                changes.setdefault(key, None)
        metadata = self.actions.set_metadata(row.id, changes, body.machine_version)
        return json_response(metadata)

    async def get_metadata_key(self, request: Request) -> Response:
        metadata = self.actions.metadata(self._machine(request).id)
        key = request.path_params["key"]
        if key not in metadata:
            raise NotFound(f"metadata key not found: {key}")
        return json_response({"value": metadata[key]})

    async def set_metadata_key(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.MetadataValueBody)
        self.actions.set_metadata(row.id, {request.path_params["key"]: body.value})
        return Response(status_code=204)

    async def delete_metadata_key(self, request: Request) -> Response:
        row = self._machine(request)
        self.actions.set_metadata(row.id, {request.path_params["key"]: None})
        return Response(status_code=204)

    # -- volumes --------------------------------------------------------------------------
    async def list_volumes(self, request: Request) -> Response:
        rows = self.volumes.list(request.query_params.get("app"),
                                 query_bool(request, "include_deleted"))
        return json_response([volume_wire(row, worker=self.name) for row in rows])

    async def create_volume(self, request: Request) -> Response:
        body = await read_model(request, wire.CreateVolumeBody)
        row = await self.volumes.create(
            VolumeRequest(app=body.app, name=body.name, region=self.region,
                          size_gb=body.size_gb, encrypted=body.encrypted, fstype=body.fstype,
                          snapshot_retention=body.snapshot_retention,
                          auto_backup_enabled=body.auto_backup_enabled,
                          require_unique_zone=body.require_unique_zone)
        )
        return json_response(volume_wire(row, worker=self.name))

    async def get_volume(self, request: Request) -> Response:
        row = self.volumes.get(request.path_params["id"], request.query_params.get("app"))
        return json_response(volume_wire(row, worker=self.name))

    async def update_volume(self, request: Request) -> Response:
        body = await read_model(request, wire.UpdateVolumeBody)
        row = self.volumes.update(request.path_params["id"], _app(request),
                                  body.snapshot_retention, body.auto_backup_enabled)
        return json_response(volume_wire(row, worker=self.name))

    async def delete_volume(self, request: Request) -> Response:
        row = await self.volumes.delete(request.path_params["id"], _app(request))
        return json_response(volume_wire(row, worker=self.name))

    async def extend_volume(self, request: Request) -> Response:
        body = await read_model(request, wire.ExtendVolumeBody)
        row, needs_restart = self.volumes.extend(request.path_params["id"], _app(request),
                                                 body.size_gb)
        return json_response({"volume": volume_wire(row, worker=self.name),
                              "needs_restart": needs_restart})

    async def prometheus(self, request: Request) -> Response:
        self.before_scrape()
        return Response(generate_latest(self.metrics.registry),
                        media_type="text/plain; version=0.0.4")


def _app(request: Request) -> str:
    app = request.query_params.get("app")
    if not app:
        raise BadRequest("the app query parameter is required")
    return app


def _seconds(value: str | int | float | None) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.isdigit():
        return float(value)  # a bare number in a query string means seconds
    try:
        return parse_duration(value, 10.0)
    except ValueError as exc:
        raise BadRequest(f"invalid_argument: {exc}") from None
