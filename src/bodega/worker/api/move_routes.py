"""A machine's move: the broker's call to the machine's worker, and the import a worker
makes of a machine another worker hands it (``ops/moves.py``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from bodega.model.errors import BadRequest, Conflict, Unavailable
from bodega.model.ids import VOLUME_ID_RE
from bodega.wire.internal.moves import ImportMachineBody, MoveBody, MoveDone
from bodega.wire.transport.http import answer_response, read_model, read_trusted_model
from bodega.worker.api.machine_routes import MachineRoutes, RouteSpec, lease_nonce
from bodega.worker.ops.moves import MachineMoves


class MoveRoutes:
    def __init__(self, moves: MachineMoves, machines: MachineRoutes) -> None:
        self.moves = moves
        self.machines = machines  # how a machine is found and answered

    def routes(self) -> list[RouteSpec]:
        return [("/v1/machines/{id}/move", "POST", self.move),
                ("/v1/machines/{id}/import", "POST", self.take),
                ("/v1/machines/{id}/import-volume", "POST", self.receive),
                ("/v1/machines/{id}/migrate-in", "POST", self.take_state),
                ("/v1/machines/{id}/switch", "POST", self.switch)]

    async def move(self, request: Request) -> Response:
        row = self.machines._machine(request)
        body = await read_model(request, MoveBody)
        moved = await self.moves.move(row.id, body, lease_nonce(request))
        if moved is None:
            raise Unavailable(f"unavailable: machine {row.id} is being moved; worker "
                              f"{body.target} does not take it yet (the move goes on)")
        if moved.op.status != "done":
            if moved.refusal is not None:
                raise moved.refusal
            raise Conflict(f"the move of machine {row.id} failed at {moved.op.step}: "
                           f"{moved.op.error}; it stays on worker {self.moves.name}")
        return answer_response(MoveDone(worker=body.target))

    async def receive(self, request: Request) -> Response:
        volume_id = request.query_params.get("volume_id", "")
        if not VOLUME_ID_RE.match(volume_id):
            raise BadRequest(f"invalid_argument: {volume_id!r} is not a volume id")
        received = await self.moves.receive(volume_id, request.query_params.get("move_id", ""),
                                            request.stream())
        return answer_response(received)

    async def take(self, request: Request) -> Response:
        body = await read_trusted_model(request, ImportMachineBody)
        row = await self.moves.take(body)
        return answer_response(self.machines._answer(row))

    async def take_state(self, request: Request) -> Response:
        """A live move's stream of the VM's state, relayed by its source's worker."""
        taken = await self.moves.live.take_state(
            request.path_params["id"], request.query_params.get("move_id", ""),
            request.stream())
        return answer_response(taken)

    async def switch(self, request: Request) -> Response:
        """A live move's end: its root disk, and whether the VM goes on with its state."""
        params = request.query_params
        mode = params.get("mode", "")
        if mode not in ("live", "cold"):
            raise BadRequest(f"invalid_argument: mode {mode!r} is not live or cold")
        try:
            paused_ms = int(params.get("paused_ms", "0"))
        except ValueError:
            raise BadRequest("invalid_argument: paused_ms is not a number") from None
        switched = await self.moves.live.switch(
            request.path_params["id"], params.get("move_id", ""), mode,
            params.get("source", ""), params.get("why", ""), paused_ms, request.stream())
        return answer_response(switched)
