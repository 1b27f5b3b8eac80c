"""``/v1/apps/{app}/machines``: create, read, update, delete and act on machines.

A create is placed by ``Machines`` (the reserve loop over the ranked
workers); every other call finds the machine's worker in the view and is
forwarded there with a typed body. A machine comes back as its model
(``Machine``, without the worker's internal fields); any other answer is
relayed as the bytes the worker wrote (``forward``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.machines.create import MachineCreate
from bodega.broker.machines.moves import MachineMoves
from bodega.broker.machines.service import Machines
from bodega.model.errors import BadRequest, BodegaError
from bodega.wire.internal import worker_calls as wire
from bodega.wire.public import fly
from bodega.wire.public.moves import MoveMachineRequest
from bodega.wire.transport.http import (
    RouteMaker,
    answer_response,
    encoded_response,
    query_bool,
    query_int,
    read_model,
)
from bodega.wire.transport.json_client import NONCE_HEADER, Params

NO_ROOM_TO_START = frozenset({"insufficient_capacity", "cordoned"})  # the start moves
WAIT_SLACK = 5.0  # beyond a /wait's own timeout, for the round trip to the worker
MACHINE = "/v1/apps/{app}/machines/{id}"

Handler = Callable[[Request, Principal], Awaitable[Response]]


async def forward(machines: Machines, request: Request, method: str, action: str = "", *,
                  body: wire.WorkerRequest | None = None, params: Params = None,
                  timeout: float | None = None, status: int = 200,
                  owner: str | None = None) -> Response:
    """Hand a call on one machine to the worker that holds it, with the caller's lease nonce;
    its answer is relayed as the worker wrote it."""
    answer = await machines.relay(
        request.path_params["app"], request.path_params["id"], method, action, body=body,
        params=params, nonce=request.headers.get(NONCE_HEADER), timeout=timeout, owner=owner)
    if answer is None:
        return Response(status_code=204 if status == 200 else status)
    return encoded_response(answer, status)


def machine_routes(r: RouteMaker, machines: Machines, creation: MachineCreate) -> list[Route]:
    async def list_machines(request: Request, who: Principal) -> Response:
        q = request.query_params
        metadata = {k.removeprefix("metadata."): v for k, v in q.items()
                    if k.startswith("metadata.")}
        states = {s.strip() for v in q.getlist("state") for s in v.split(",") if s.strip()}
        regions = {s.strip() for v in q.getlist("region") for s in v.split(",") if s.strip()}
        return answer_response(machines.list(
            request.path_params["app"], include_deleted=query_bool(request, "include_deleted"),
            regions=regions, states=states, metadata=metadata,
            summary=query_bool(request, "summary")))

    async def create_machine(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.CreateMachineRequest)
        key = request.headers.get("idempotency-key") or request.headers.get(
            "fly-idempotency-key")
        if key is not None and not 1 <= len(key) <= 128:
            raise BadRequest("invalid_argument: Idempotency-Key must be 1-128 characters")
        machine = await creation.create(request.path_params["app"], body, key, who.token_id)
        return answer_response(machine)

    async def get_machine(request: Request, who: Principal) -> Response:
        return answer_response(await machines.get(request.path_params["app"],
                                                  request.path_params["id"]))

    async def update_machine(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.UpdateMachineRequest)
        return answer_response(await machines.update(
            request.path_params["app"], request.path_params["id"], wire.UpdateMachineBody(
                config=body.config, current_version=body.current_version,
                skip_launch=body.skip_launch, name=body.name, region=body.region),
            nonce=request.headers.get(NONCE_HEADER)))

    async def delete_machine(request: Request, who: Principal) -> Response:
        force = query_bool(request, "force", "kill")
        return await forward(machines, request, "DELETE",
                             params={"force": "true"} if force else {})

    def act(action: str) -> Handler:
        async def handle(request: Request, who: Principal) -> Response:
            params = {k: v for k, v in request.query_params.items()
                      if k in ("timeout", "signal", "force_stop")}
            return await forward(machines, request, "POST", action, params=params)
        return handle

    def read(part: str) -> Handler:
        async def handle(request: Request, who: Principal) -> Response:
            params = {k: v for k, v in request.query_params.items() if k == "limit"}
            return await forward(machines, request, "GET", part, params=params)
        return handle

    async def stop(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.StopRequest, required=False)
        return await forward(machines, request, "POST", "stop",
                             body=wire.StopBody(signal=body.signal, timeout=body.timeout))

    moves = MachineMoves(machines, creation.placer)

    async def move(request: Request, who: Principal) -> Response:  # a bodega extension
        body = await read_model(request, MoveMachineRequest)
        return answer_response(await moves.move(
            request.path_params["app"], request.path_params["id"], body,
            nonce=request.headers.get(NONCE_HEADER)))

    async def start(request: Request, who: Principal) -> Response:
        try:
            return await act("start")(request, who)
        except BodegaError as refused:
            if refused.status not in NO_ROOM_TO_START:
                raise
            return answer_response(await moves.start_elsewhere(
                request.path_params["app"], request.path_params["id"], refused,
                nonce=request.headers.get(NONCE_HEADER),
                with_volume=query_bool(request, "move")))

    async def signal(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.SignalRequest)
        return await forward(machines, request, "POST", "signal",
                             body=wire.SignalBody(signal=body.signal))

    async def suspend(request: Request, who: Principal) -> Response:
        return await forward(machines, request, "POST", "suspend")

    async def exec_(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.ExecRequest)
        return await forward(machines, request, "POST", "exec", body=wire.ExecBody(
            command=body.command, cmd=body.cmd, timeout=body.timeout, stdin=body.stdin,
            container=body.container), timeout=body.timeout + wire.EXEC_SLACK)

    async def get_memory(request: Request, who: Principal) -> Response:
        return await forward(machines, request, "GET", "memory")

    async def set_memory(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.SetMemoryLimitRequest)
        return await forward(machines, request, "PUT", "memory",
                             body=wire.SetMemoryBody(limit_mb=body.limit_mb))

    async def reclaim_memory(request: Request, who: Principal) -> Response:
        body = await read_model(request, fly.ReclaimMemoryRequest, required=False)
        return await forward(machines, request, "POST", "memory/reclaim",
                             body=wire.ReclaimMemoryBody(amount_mb=body.amount_mb))

    async def wait(request: Request, who: Principal) -> Response:
        params: list[tuple[str, str]] = [
            (k, v) for k, v in request.query_params.multi_items()
            if k in ("state", "timeout", "version", "instance_id", "from_event_id")]
        timeout = min(max(query_int(request, "timeout", 60), 1), 60)
        return await forward(machines, request, "GET", "wait", params=params,
                             timeout=timeout + WAIT_SLACK)

    m = MACHINE
    return [
        r("/v1/apps/{app}/machines", list_machines, "GET"),
        r("/v1/apps/{app}/machines", create_machine, "POST"),
        r(m, get_machine, "GET"),
        r(m, update_machine, "POST"),
        r(m, delete_machine, "DELETE"),
        *(r(f"{m}/{action}", act(action), "POST")
          for action in ("restart", "cordon", "uncordon")),
        r(f"{m}/start", start, "POST"),
        r(f"{m}/stop", stop, "POST"),
        r(f"{m}/move", move, "POST"),
        r(f"{m}/signal", signal, "POST"),
        r(f"{m}/suspend", suspend, "POST"),
        r(f"{m}/exec", exec_, "POST"),
        r(f"{m}/wait", wait, "GET"),
        r(f"{m}/memory", get_memory, "GET"),
        r(f"{m}/memory", set_memory, "PUT"),
        r(f"{m}/memory/reclaim", reclaim_memory, "POST"),
        *(r(f"{m}/{part}", read(part), "GET")
          for part in ("ps", "events", "versions", "placement", "metadata")),
    ]
