"""``GET /v1/apps/{app}/logs``: an app's logs, fanned in from its machines' workers (NDJSON).

Query: ``machine`` (one machine), ``region``, ``follow``, ``since`` and
``limit`` (see ``wire/public/logs.py``). Without ``follow`` every worker's answer
is gathered, merged by time and cut to the newest ``limit``; with it, each
machine's lines are passed on as they arrive, interleaved in arrival order.
A worker that cannot be reached is left out (and logged); the rest still
answer. Machines created after a follow began are not added to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import aiohttp
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from bodega.broker.auth.tokens import Principal
from bodega.broker.machines.service import Machines
from bodega.model.errors import BodegaError, NotFound
from bodega.model.machine import Machine
from bodega.wire.public import logs as wire
from bodega.wire.transport.http import RouteMaker, query_bool

log = logging.getLogger("bodega.broker.logs")

CONNECT_TIMEOUT = 10.0


def log_routes(r: RouteMaker, machines: Machines) -> list[Route]:
    async def app_logs(request: Request, who: Principal) -> Response:
        app = request.path_params["app"]
        machines.apps.require(app)
        q = request.query_params
        follow = query_bool(request, "follow")
        wire.parse_since(q.get("since"))  # refuse a bad one here, before streaming
        limit = wire.parse_limit(q.get("limit"))
        found = [m for m in machines.app_machines(app, destroyed=False)
                 if (not q.get("machine") or m.id == q["machine"])
                 and (not q.get("region") or m.region == q["region"])]
        if q.get("machine") and not found:
            raise NotFound(f"machine not found: {q['machine']}")
        params = {k: v for k, v in (("since", q.get("since")), ("limit", str(limit)),
                                    ("follow", "true" if follow else None)) if v}
        sources = [_source(machines, m, params) for m in found]
        stream = _follow(sources) if follow else _gathered(sources, limit)
        return StreamingResponse(stream, media_type=wire.MEDIA_TYPE)

    return [r("/v1/apps/{app}/logs", app_logs, "GET")]


async def _source(machines: Machines, machine: Machine,
                  params: dict[str, str]) -> AsyncIterator[bytes]:
    """One machine's NDJSON lines from its worker; nothing if the worker cannot be asked."""
    worker = machine.worker or ""
    try:
        client = machines.workers.client(worker)
        async with client.http.get(
                f"{client.base_url}/v1/machines/{machine.id}/logs", params=params,
                headers=client.headers,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
        ) as answer:
            if answer.status != 200:
                log.warning("logs of %s from %s: HTTP %s", machine.id, worker, answer.status)
                return
            async for line in answer.content:
                if line.strip():
                    yield line if line.endswith(b"\n") else line + b"\n"
    except (BodegaError, aiohttp.ClientError, TimeoutError) as exc:
        log.warning("logs of %s from %s: %s", machine.id, worker, exc)


async def _gathered(sources: list[AsyncIterator[bytes]], limit: int) -> AsyncIterator[bytes]:
    async def collect(source: AsyncIterator[bytes]) -> list[wire.LogLine]:
        return [wire.LogLine.model_validate_json(line) async for line in source]

    parts = await asyncio.gather(*(collect(s) for s in sources))
    for line in wire.select((line for part in parts for line in part), None, limit):
        yield line.ndjson()


async def _follow(sources: list[AsyncIterator[bytes]]) -> AsyncIterator[bytes]:
    queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=1024)

    async def pump(source: AsyncIterator[bytes]) -> None:
        try:
            async for line in source:
                await queue.put(line)
        finally:
            await queue.put(None)

    tasks = [asyncio.create_task(pump(s)) for s in sources]
    try:
        running = len(tasks)
        while running:
            item = await queue.get()
            if item is None:
                running -= 1
            else:
                yield item
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
