"""``GET /v1/machines/{id}/logs``: one machine's log as NDJSON, optionally followed.

A machine writes its stdout and stderr straight into ``logs/machine.log``
(kept bounded by copytruncate into ``machine.log.1``); nothing stamps the
lines as they are written, so lines already in the files carry the time the
worker's log keeper saw them appear (``drivers/process/logtimes.py``, within
a quarter of a second), and followed lines the time the worker read them
(within ``POLL`` seconds). Following polls the file's size and reads only
what was appended; a truncation (rotation) starts again from the top.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bodega.model.machine import rfc3339
from bodega.model.states import MachineState
from bodega.wire.public import logs as wire
from bodega.wire.transport.http import query_bool
from bodega.worker.api.machine_routes import RouteSpec, find_machine
from bodega.worker.core.records import MachineRow
from bodega.worker.drivers.process import logtimes
from bodega.worker.drivers.process.logfiles import log_path
from bodega.worker.ops.machines import MachineService
from bodega.worker.store import queries

POLL = 0.25
HISTORY_BYTES = 1024 * 1024  # read at most this much of a log's past per request
READ_BYTES = 256 * 1024  # and at most this much new log per poll


def read_history(path: Path) -> tuple[list[tuple[float, str]], int]:
    """(when written, line) for the log's last lines, and the live file's size (where
    following starts)."""
    out: list[tuple[float, str]] = []
    size = 0
    budget = HISTORY_BYTES
    for candidate in (path.with_name(path.name + ".1"), path):
        try:
            with candidate.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                start = max(0, stat.st_size - budget)
                handle.seek(start)
                data = handle.read(stat.st_size - start)
        except FileNotFoundError:
            continue
        if candidate == path:
            size = stat.st_size
        pieces = data.split(b"\n")
        if not pieces[-1]:
            pieces.pop()  # the file ends with a whole line
        ends, end = [], start
        for piece in pieces:
            end = min(end + len(piece) + 1, start + len(data))
            ends.append(end)
        lines = [piece[:wire.MAX_LINE].decode("utf-8", "replace").rstrip("\r")
                 for piece in pieces]
        times = logtimes.stamp(ends, logtimes.read_checkpoints(logtimes.times_path(candidate)),
                               stat.st_mtime)
        dated = list(zip(times, lines, strict=True))
        if start > 0 and dated:
            dated = dated[1:]  # the first line was cut by the budget
        out += dated
    return out, size


def read_from(path: Path, offset: int) -> tuple[bytes, int]:
    """What was appended since ``offset``, and the new offset (0 after a truncation)."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < offset:
                offset = 0
            handle.seek(offset)
            data = handle.read(min(READ_BYTES, size - offset))
    except FileNotFoundError:
        return b"", 0
    return data, offset + len(data)


class LogRoutes:
    def __init__(self, *, region: str, machines: MachineService,
                 machine_dir: Callable[[str], Path]) -> None:
        self.region = region
        self.machines = machines
        self.machine_dir = machine_dir

    def routes(self) -> list[RouteSpec]:
        return [("/v1/machines/{id}/logs", "GET", self.logs)]

    async def logs(self, request: Request) -> Response:
        row = find_machine(self.machines, request)
        follow = query_bool(request, "follow")
        since = wire.parse_since(request.query_params.get("since"))
        limit = wire.parse_limit(request.query_params.get("limit"))
        return StreamingResponse(self._stream(row, follow, since, limit),
                                 media_type=wire.MEDIA_TYPE)

    def _line(self, row: MachineRow, at: float, message: str) -> wire.LogLine:
        return wire.LogLine(timestamp=rfc3339(at), app=row.app, machine_id=row.id,
                            region=self.region, instance_id=row.instance_id, stream="stdout",
                            message=message)

    async def _stream(self, row: MachineRow, follow: bool, since: float | None,
                      limit: int) -> AsyncIterator[bytes]:
        path = log_path(self.machine_dir(row.id))
        history, offset = await asyncio.to_thread(read_history, path)
        for line in wire.select((self._line(row, at, text) for at, text in history),
                                since, limit):
            yield line.ndjson()
        pending = b""
        while follow:
            await asyncio.sleep(POLL)
            data, offset = await asyncio.to_thread(read_from, path, offset)
            lines, pending = wire.split_lines(pending, data)
            current = queries.get_machine(self.machines.store.db, row.id)
            if current is None or current.state == MachineState.DESTROYED:
                return
            now = self.machines.store.clock()
            for text in lines:
                yield self._line(current, now, text).ndjson()
