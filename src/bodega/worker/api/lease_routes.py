"""The worker's lease and metadata routes of a machine."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bodega.model.errors import NotFound
from bodega.model.machine_answers import LeaseAnswer, MetadataValue
from bodega.wire.internal import worker_calls as wire
from bodega.wire.transport.http import answer_response, json_response, query_int, read_model
from bodega.worker.api.machine_routes import RouteSpec, find_machine, lease_nonce, owner
from bodega.worker.core.records import MachineRow
from bodega.worker.ops.actions import MachineActions
from bodega.worker.ops.machines import MachineService


class LeaseRoutes:
    def __init__(self, *, machines: MachineService, actions: MachineActions) -> None:
        self.machines = machines
        self.actions = actions

    def routes(self) -> list[RouteSpec]:
        m = "/v1/machines/{id}"
        return [
            (f"{m}/lease", "GET", self.get_lease),
            (f"{m}/lease", "POST", self.acquire_lease),
            (f"{m}/lease", "DELETE", self.release_lease),
            (f"{m}/metadata", "GET", self.get_metadata),
            (f"{m}/metadata", "PUT", self.replace_metadata),
            (f"{m}/metadata", "PATCH", self.replace_metadata),
            (f"{m}/metadata/{{key}}", "GET", self.get_metadata_key),
            (f"{m}/metadata/{{key}}", "POST", self.set_metadata_key),
            (f"{m}/metadata/{{key}}", "DELETE", self.delete_metadata_key),
        ]

    def _machine(self, request: Request) -> MachineRow:
        return find_machine(self.machines, request)

    async def get_lease(self, request: Request) -> Response:
        lease = self.actions.lease(self._machine(request).id)
        return answer_response(LeaseAnswer(data=lease.answer()))

    async def acquire_lease(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.LeaseBody, required=False)
        ttl = body.ttl or query_int(request, "ttl", 30)
        lease = self.actions.acquire_lease(row.id, ttl, body.description, owner(request),
                                           lease_nonce(request))
        return answer_response(LeaseAnswer(data=lease.answer()))

    async def release_lease(self, request: Request) -> Response:
        self.actions.release_lease(self._machine(request).id, lease_nonce(request))
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
        return answer_response(MetadataValue(value=metadata[key]))

    async def set_metadata_key(self, request: Request) -> Response:
        row = self._machine(request)
        body = await read_model(request, wire.MetadataValueBody)
        self.actions.set_metadata(row.id, {request.path_params["key"]: body.value})
        return Response(status_code=204)

    async def delete_metadata_key(self, request: Request) -> Response:
        row = self._machine(request)
        self.actions.set_metadata(row.id, {request.path_params["key"]: None})
        return Response(status_code=204)
