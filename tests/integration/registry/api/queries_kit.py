"""The registry's query API on loopback, on a replica the real ``View`` and ``Replica`` write.

``replica_file`` makes a node's replica (a SQLite file in WAL mode, as the agent
keeps it); ``serving`` runs a ``RegistryQueries`` on it behind uvicorn, with the
admin token check the agent passes; ``Answer`` reads an NDJSON answer line by line.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request

from bodega.registry.api import QueryLimits, RegistryQueries
from bodega.registry.replication.core.schema import TABLES, Kind
from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from bodega.runtime.serve import serve
from bodega.runtime.waits import within
from bodega.wire.transport.http import bearer_token

ADMIN = "admin-token"
AUTH = {"authorization": f"Bearer {ADMIN}"}
LINE_WAIT = 10.0  # seconds a test waits for the next line before failing


def machine(machine_id: str, state: str = "started", app: str = "web",
            image: str = "registry.example/web:1") -> dict[str, Any]:
    return {"id": machine_id, "app": app, "name": f"m-{machine_id}", "region": "ams",
            "worker": "w1", "state": state, "config": {"image": image}}


@dataclass
class Node:
    """One host's replica, written as the agent writes it."""
    path: Path
    view: View
    replica: Replica

    def write(self, table: str, key: str, doc: dict[str, Any] | None) -> None:
        self.replica.write(table, key, doc, shared=TABLES[table].kind is Kind.SHARED)


@contextmanager
def replica_file(directory: Path) -> Iterator[Node]:
    path = directory / "registry.db"
    view = View(path)
    try:
        yield Node(path, view, Replica("w1", view))
    finally:
        view.close()


@dataclass
class Api:
    queries: RegistryQueries
    url: str

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=AUTH, timeout=30.0)


def admin_only(request: Request) -> bool:
    return bearer_token(request) == ADMIN


@asynccontextmanager
async def serving(node: Node, state: Path, limits: QueryLimits | None = None
                  ) -> AsyncIterator[Api]:
    queries = RegistryQueries(node.path, state, authorize=admin_only, limits=limits)
    await queries.start()
    server = await serve(Starlette(routes=queries.routes()), "127.0.0.1", 0)
    try:
        yield Api(queries, server.url)
    finally:
        await server.stop(grace=1.0)
        await queries.stop()


class Answer:
    """An NDJSON answer read a line at a time, each within ``LINE_WAIT``."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self) -> Any:
        while True:
            line = await within(anext(self._lines), LINE_WAIT)
            if line.strip():
                return json.loads(line)

    async def take(self, count: int) -> list[Any]:
        return [await self.next() for _ in range(count)]

    async def rest(self) -> list[Any]:
        """Every line left, to the answer's end (a query's, not a subscription's)."""
        return [json.loads(line) async for line in self._lines if line.strip()]


@asynccontextmanager
async def streamed(client: httpx.AsyncClient, method: str, path: str,
                   body: Any = None) -> AsyncIterator[Answer]:
    request = client.build_request(method, path, json=body)
    response = await client.send(request, stream=True)
    try:
        yield Answer(response)
    finally:
        await response.aclose()
