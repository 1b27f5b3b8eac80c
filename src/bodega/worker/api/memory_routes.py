"""The worker's machine memory routes: the limit (read and set live) and a reclaim."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bodega.wire.internal import worker_calls as wire
from bodega.wire.transport.http import answer_response, read_model
from bodega.worker.api.machine_routes import RouteSpec, find_machine, lease_nonce
from bodega.worker.ops.memory import MachineMemory


class MemoryRoutes:
    def __init__(self, memory: MachineMemory) -> None:
        self.memory = memory

    def routes(self) -> list[RouteSpec]:
        m = "/v1/machines/{id}/memory"
        return [
            (m, "GET", self.get_memory),
            (m, "PUT", self.set_memory),
            (f"{m}/reclaim", "POST", self.reclaim),
        ]

    async def get_memory(self, request: Request) -> Response:
        row = find_machine(self.memory.machines, request)
        return answer_response(self.memory.get(row.id))

    async def set_memory(self, request: Request) -> Response:
        row = find_machine(self.memory.machines, request)
        body = await read_model(request, wire.SetMemoryBody)
        return answer_response(await self.memory.set_limit(row.id, body.limit_mb,
                                                           lease_nonce(request)))

    async def reclaim(self, request: Request) -> Response:
        row = find_machine(self.memory.machines, request)
        body = await read_model(request, wire.ReclaimMemoryBody, required=False)
        return answer_response(await self.memory.reclaim(row.id, body.amount_mb))
