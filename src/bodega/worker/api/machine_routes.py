"""The worker's machine routes: create, read, update, destroy, and the lifecycle actions.

Bodies are read into ``worker_calls`` models, which refuse unknown fields; a
machine route answers 404 for a machine of another app when ``app`` is given,
so a caller can never reach across apps by id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from bodega.model.duration import parse_duration
from bodega.model.errors import BadRequest, NotFound
from bodega.model.machine import Machine
from bodega.wire.internal import worker_calls as wire
from bodega.wire.transport.http import (
    answer_response,
    json_response,
    query_bool,
    query_int,
    read_model,
    read_trusted_model,
)
from bodega.wire.transport.json_client import NONCE_HEADER
from bodega.worker.api.render import machine_answer
from bodega.worker.core.records import MachineRow
from bodega.worker.ops.actions import MachineActions, parse_wait_states
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import queries

# (path, method, handler): each module of routes lists its own; the server mounts them.
DONE = wire.Done(ok=True).model_dump()
RouteSpec = tuple[str, str, Callable[[Request], Awaitable[Response]]]


def lease_nonce(request: Request) -> str | None:
    return request.headers.get(NONCE_HEADER)


def owner(request: Request) -> str:
    return request.headers.get(wire.OWNER_HEADER, "bodega")


def find_machine(machines: MachineService, request: HTTPConnection) -> MachineRow:
    """The machine the path names; 404 when it belongs to another app than the one asked."""
    row = machines.get(request.path_params["id"])
    app = request.query_params.get("app")
    if app is not None and row.app != app:
        raise NotFound(f"machine not found: {row.id}")
    return row


def seconds(value: str | int | float | None) -> float | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.isdigit():
        return float(value)  # a bare number in a query string means seconds
    try:
        return parse_duration(value, 10.0)
    except ValueError as exc:
        raise BadRequest(f"invalid_argument: {exc}") from None


class MachineRoutes:
    def __init__(self, *, name: str, region: str, machines: MachineService,
                 actions: MachineActions,
                 service_host: Callable[[MachineRow], str | None]) -> None:
        self.name = name
        self.region = region
        self.machines = machines
        self.actions = actions
        self.service_host = service_host

    def routes(self) -> list[RouteSpec]:
        m = "/v1/machines/{id}"
        return [
            ("/v1/machines", "GET", self.list_machines),
            ("/v1/machines", "POST", self.create_machine),
            (m, "GET", self.get_machine),
            (m, "POST", self.update_machine),
            (m, "DELETE", self.destroy_machine),
            (f"{m}/start", "POST", self.start),
            (f"{m}/stop", "POST", self.stop),
            (f"{m}/restart", "POST", self.restart),
            (f"{m}/signal", "POST", self.signal),
            (f"{m}/suspend", "POST", self.suspend),
            (f"{m}/cordon", "POST", self.cordon),
            (f"{m}/uncordon", "POST", self.uncordon),
            (f"{m}/exec", "POST", self.exec),
            (f"{m}/ps", "GET", self.ps),
            (f"{m}/wait", "GET", self.wait),
            (f"{m}/events", "GET", self.events),
            (f"{m}/versions", "GET", self.versions),
            (f"{m}/placement", "GET", self.placement),
        ]

    def _machine(self, request: Request) -> MachineRow:
        return find_machine(self.machines, request)

    def _answer(self, row: MachineRow, *, events: bool = True, nonce: str | None = None
                ) -> Machine:
        machine = machine_answer(
            row, worker=self.name,
            events=self.machines.store.events(row.id, 20) if events else None,
            nonce=nonce, service_host=self.service_host(row),
        )
        private = self.machines.effects.private
        if private is not None:  # its private IPv6 address, as in its registry row
            machine = machine.model_copy(update=private.published(row))
        return machine

    async def list_machines(self, request: Request) -> Response:
        rows = queries.list_machines(self.machines.store.db, request.query_params.get("app"),
                                    query_bool(request, "include_deleted"))
        return answer_response([self._answer(row, events=False) for row in rows])

    async def create_machine(self, request: Request) -> Response:
        # The broker validated this config already: decode it in one pass, check only what
        # only this worker can (room, names, ids, its driver's needs) in ``ops/creation.py``,
        # which acts on this body as it came.
        body = await read_trusted_model(request, wire.CreateMachineBody)
        row, nonce = await self.machines.creation.create(body, owner=owner(request))
        return answer_response(self._answer(row, nonce=nonce))

    async def get_machine(self, request: Request) -> Response:
        return answer_response(self._answer(self._machine(request)))

    async def update_machine(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.UpdateMachineBody)
        updated = await self.machines.update(
            row.id, body.config, nonce=lease_nonce(request),
            current_version=body.current_version, skip_launch=body.skip_launch,
            name=body.name, region=body.region,
        )
        return answer_response(self._answer(updated))

    async def destroy_machine(self, request: Request) -> Response:
        row = self._machine(request)
        await self.machines.destroy(row.id, lease_nonce(request),
                                    force=query_bool(request, "force", "kill"),
                                    lease_override=query_bool(request, "lease_override"))
        return json_response(DONE)

    async def start(self, request: Request) -> Response:
        row = self._machine(request)
        return answer_response(await self.machines.start(row.id, lease_nonce(request)))

    async def stop(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.StopBody, required=False)
        await self.machines.stop(row.id, lease_nonce(request), body.signal,
                                 seconds(body.timeout))
        return json_response(DONE)

    async def restart(self, request: Request) -> Response:
        row = self._machine(request)
        timeout = seconds(request.query_params.get("timeout"))
        await self.machines.restart(row.id, lease_nonce(request),
                                    request.query_params.get("signal"), timeout)
        return json_response(DONE)

    async def signal(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.SignalBody)
        await self.actions.signal(row.id, body.signal)
        return json_response(DONE)

    async def suspend(self, request: Request) -> Response:
        row = self._machine(request)
        await self.machines.suspend(row.id, lease_nonce(request))
        return json_response(DONE)

    async def cordon(self, request: Request) -> Response:
        self.actions.cordon(self._machine(request).id, True, lease_nonce(request))
        return json_response(DONE)

    async def uncordon(self, request: Request) -> Response:
        self.actions.cordon(self._machine(request).id, False, lease_nonce(request))
        return json_response(DONE)

    async def exec(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.ExecBody)
        command = body.command or (body.cmd.split() if body.cmd else [])
        result = await self.actions.exec(row.id, command, float(body.timeout), body.stdin,
                                         lease_nonce(request))
        return answer_response(result.answer())

    async def ps(self, request: Request) -> Response:
        processes = await self.actions.ps(self._machine(request).id)
        return answer_response([p.answer() for p in processes])

    async def wait(self, request: Request) -> Response:
        row = self._machine(request)
        states = parse_wait_states(request.query_params.getlist("state"))
        version = request.query_params.get("version") or request.query_params.get("instance_id")
        body = await self.actions.wait(
            row.id, states, query_int(request, "timeout", 60), version,
            request.query_params.get("from_event_id"),
        )
        return answer_response(body)

    async def events(self, request: Request) -> Response:
        row = self._machine(request)
        return answer_response(self.actions.events(row.id, query_int(request, "limit", 20)))

    async def versions(self, request: Request) -> Response:
        return answer_response(self.actions.versions(self._machine(request).id))

    async def placement(self, request: Request) -> Response:
        row = self._machine(request)
        if row.placement_json is None:
            raise NotFound(f"no placement record for machine {row.id}")
        return Response(row.placement_json, media_type="application/json")
