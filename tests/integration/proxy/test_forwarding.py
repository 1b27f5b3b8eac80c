"""The proxy's request path over real sockets: keep-alive, streaming, upgrades, retries, errors.

Machines here are plain asyncio HTTP servers on loopback, put straight into
the routing table; the cluster tests run the same path against real workers.
Every test runs on both data planes (bodega's own, and HAProxy with bodega's
proxy as its activator): see ``plane_kit.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from bodega.model.machine import Machine as Answer
from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.http1 import Head, copy_body, read_head
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker
from tests.ports_kit import free_port, is_free

from .plane_kit import PLANES, Serving, serving


@dataclass
class Machine:
    """A tiny HTTP/1.1 server: echoes what it got, streams big bodies, upgrades to an echo."""

    name: str
    server: asyncio.Server | None = None
    seen: list[dict[str, str]] = field(default_factory=list)
    writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.add(writer)
        try:
            while (head := await read_head(reader)) is not None:
                headers = {k.decode().lower(): v.decode() for k, v in head.headers}
                self.seen.append(headers)
                sink = _Digest()
                await read_body(head, reader, sink)
                path = head.start[1].decode()
                if head.upgrade():
                    writer.write(b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\n"
                                 b"Upgrade: echo\r\n\r\n")
                    while data := await reader.read(1024):
                        writer.write(data.upper())
                    break
                if path.startswith("/download/"):
                    size = int(path.rsplit("/", 1)[1])
                    writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                    block = b"x" * 65536
                    sent = 0
                    while sent < size:
                        part = block[: min(len(block), size - sent)]
                        writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                        sent += len(part)
                        await writer.drain()
                    writer.write(b"0\r\n\r\n")
                    continue
                body = f"{self.name} {head.method.decode()} {path} {sink.count} " \
                       f"{sink.hash.hexdigest()}".encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode()
                             + b"\r\n\r\n" + body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self.writers.discard(writer)
            writer.close()

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            for writer in list(self.writers):
                writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)


async def read_body(head: Head, reader: asyncio.StreamReader, sink: _Digest) -> None:
    """The body's bytes, with chunked framing taken off (the proxy passes framing through)."""
    if not head.chunked():
        await copy_body(head, reader, sink)
        return
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        sink.write((await reader.readexactly(size + 2))[:-2])
    while await reader.readuntil(b"\r\n") != b"\r\n":
        pass


class _Digest:
    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.count = 0

    def write(self, data: bytes) -> None:
        self.hash.update(data)
        self.count += len(data)

    async def drain(self) -> None:
        return None


def machine_doc(mid: str, port: int, *, state: str = "started", region: str = "ams",
                worker: str = "w1") -> dict[str, Any]:
    return {"id": mid, "app": "web", "region": region, "worker": worker, "state": state,
            "service_host": "127.0.0.1", "created_at": mid, "config": {
                "image": "x", "services": [{"protocol": "tcp", "internal_port": port,
                                            "autostart": True,
                                            "ports": [{"port": 80, "handlers": ["http"]}]}]}}


def routed(doc: dict[str, Any]) -> Answer:
    """A machine row as the proxy reads it from the view."""
    return Answer.model_validate(doc)


@dataclass
class Rig:
    table: RoutingTable
    serving: Serving
    machines: list[Machine]
    load: Load

    @property
    def url(self) -> str:
        return self.serving.url

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


@contextlib.asynccontextmanager
async def rig(plane: str, count: int = 2) -> AsyncIterator[Rig]:
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    machines = [Machine(f"m{i}") for i in range(count)]
    try:
        for i, m in enumerate(machines):
            table.put_machine(f"m{i}", routed(machine_doc(f"m{i}", await m.start())))
        waker = Waker(table, lambda _w: None, load, metrics, "ams")
        async with serving(plane, table, waker, load, metrics) as served:
            yield Rig(table, served, machines, load)
    finally:
        for m in machines:
            await m.stop()
        await asyncio.sleep(0.05)  # let closed connections finish closing


def client(url: str, app: str = "web") -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"host": f"{app}.localhost"}, timeout=30)


async def test_requests_reach_machines_with_forwarding_headers_over_keep_alive(plane: str) -> None:
    async with rig(plane) as r, client(r.url) as http:
        answers = [await http.get(f"/hello/{i}") for i in range(20)]
        assert {a.status_code for a in answers} == {200}
        assert {a.text.split()[0] for a in answers} == {"m0", "m1"}  # both get traffic
        headers = r.machines[0].seen[0]
        assert headers["x-forwarded-for"] == "127.0.0.1"  # one hop, not HAProxy and bodega
        assert headers["x-forwarded-proto"] == "http"
        assert headers["fly-request-id"] == headers["x-request-id"]
        assert answers[0].headers["fly-request-id"]
        assert r.load.outstanding == {}
        assert answers[0].headers["fly-request-id"] != answers[1].headers["fly-request-id"]
        async with client(r.url) as http:
            kept = await http.get("/", headers={"x-request-id": "client-chose-this"})
        assert kept.headers["fly-request-id"] == "client-chose-this"


async def test_big_bodies_stream_both_ways_intact(plane: str) -> None:
    payload = os.urandom(5 * 1024 * 1024)
    async with rig(plane, 1) as r, client(r.url) as http:
        up = await http.post("/upload", content=payload)
        _name, method, _path, size, digest = up.text.split()
        assert (method, int(size), digest) == ("POST", len(payload),
                                               hashlib.sha256(payload).hexdigest())

        async def chunks() -> AsyncIterator[bytes]:
            for i in range(0, len(payload), 100_000):
                yield payload[i:i + 100_000]

        chunked = await http.post("/upload", content=chunks())
        assert chunked.text.split()[3] == str(len(payload))
        down = await http.get("/download/3000000")
        assert len(down.content) == 3_000_000


async def test_an_upgrade_becomes_a_two_way_pipe(plane: str) -> None:
    async with rig(plane, 1) as r:
        reader, writer = await asyncio.open_connection("127.0.0.1", r.port)
        writer.write(b"GET /ws HTTP/1.1\r\nHost: web.localhost\r\nConnection: Upgrade\r\n"
                     b"Upgrade: echo\r\n\r\n")
        head = await read_head(reader)
        assert head is not None
        assert head.status == 101
        for word in (b"hello", b"world"):
            writer.write(word)
            assert await reader.readexactly(len(word)) == word.upper()
        writer.close()


async def test_a_machine_that_refuses_connections_is_skipped(plane: str) -> None:
    async with rig(plane, 2) as r, client(r.url) as http:
        await r.machines[0].stop()
        answers = [await http.post("/x", content=b"body") for _ in range(6)]
        assert {a.status_code for a in answers} == {200}
        assert {a.text.split()[0] for a in answers} == {"m1"}


async def test_unknown_apps_get_404_and_apps_with_nothing_running_503(plane: str) -> None:
    async with rig(plane, 1) as r:
        async with client(r.url, "nope") as http:
            missing = await http.get("/")
        assert missing.status_code == 404
        assert "no app is served" in missing.text
        assert missing.headers["content-type"].startswith("text/plain")
        r.table.put_machine("m0", routed(machine_doc("m0", 1, state="stopped")))
        await r.serving.synced()
        async with client(r.url) as http:
            down = await http.get("/")
        assert down.status_code == 503
        assert "no machine of web can serve" in down.text


async def test_malformed_requests_get_400(plane: str) -> None:
    async with rig(plane, 1) as r:
        reader, writer = await asyncio.open_connection("127.0.0.1", r.port)
        writer.write(b"NONSENSE\r\n\r\n")
        head = await read_head(reader)
        assert head is not None
        assert head.status == 400
        writer.close()


@pytest.mark.parametrize("concurrency", [50])
async def test_concurrent_requests_to_a_sleeping_app_share_one_start(
        concurrency: int, plane: str) -> None:
    """A stand-in worker API starts the machine's server when asked, and counts the asks."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    sleeping = Machine("sleeper")
    starts: list[str] = []

    async def start(request: Any) -> JSONResponse:
        starts.append(request.path_params["id"])
        await asyncio.sleep(0.2)  # a process takes a moment to come up
        await sleeping.server_on(port)  # type: ignore[attr-defined]
        return JSONResponse({"previous_state": "stopped", "migrated": False, "new_host": ""})

    port = await _free_port()

    async def server_on(p: int) -> None:
        sleeping.server = await asyncio.start_server(sleeping.handle, "127.0.0.1", p)

    sleeping.server_on = server_on  # type: ignore[attr-defined]
    try:
        async with stand_in_worker(
                [Route("/v1/machines/{id}/start", start, methods=["POST"])],
                routed(machine_doc("s1", port, state="stopped")),
                routed(machine_doc("s2", port + 1, state="stopped"))) as w, \
                serving(plane, w.table, w.waker, w.load, w.metrics) as served, \
                client(served.url) as http:
            answers = await asyncio.gather(*(http.get(f"/{i}") for i in range(concurrency)))
            assert [a.status_code for a in answers] == [200] * concurrency
            assert starts == ["s1"]  # exactly one machine started, the oldest
            assert {a.text.split()[0] for a in answers} == {"sleeper"}
            await served.synced()  # the started machine is now served directly
            assert (await http.get("/after")).text.split()[0] == "sleeper"
    finally:
        await sleeping.stop()
        await asyncio.sleep(0.05)


async def test_a_woken_machine_gets_the_first_request_on_the_connection_that_found_it_up(
        plane: str) -> None:
    """The proxy connects until the started machine's port accepts; that connection carries
    the request (the activator makes one connection, not a probe and then the request's).
    Behind HAProxy the proxy also tries the port once before the machine takes a slot
    (``admission.py``): at most one connection more, carrying nothing."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    sleeping = Machine("sleeper")
    port = await _free_port()
    accepted: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        await sleeping.handle(reader, writer)

    async def start(request: Any) -> JSONResponse:
        sleeping.server = await asyncio.start_server(handle, "127.0.0.1", port)
        return JSONResponse({"previous_state": "stopped", "migrated": False, "new_host": ""})

    try:
        async with stand_in_worker(
                [Route("/v1/machines/{id}/start", start, methods=["POST"])],
                routed(machine_doc("s1", port, state="stopped"))) as w, \
                serving(plane, w.table, w.waker, w.load, w.metrics) as served, \
                client(served.url) as http:
            answer = await http.get("/first")
            assert answer.status_code == 200
            assert answer.text.split()[0] == "sleeper"
            assert len(sleeping.seen) == 1
            if plane == "python":
                assert len(accepted) == 1
            else:
                assert len(accepted) <= 2
    finally:
        await sleeping.stop()
        await asyncio.sleep(0.05)


@dataclass
class StandIn:
    """The proxy's side of a stand-in worker API: its table, waker, load and metrics."""

    table: RoutingTable
    waker: Waker
    load: Load
    metrics: ProxyMetrics


@contextlib.asynccontextmanager
async def stand_in_worker(routes: list[Any], *machines: Answer) -> AsyncIterator[StandIn]:
    """A worker API of ``routes`` (Starlette), and a routing table holding ``machines``
    whose waker calls it."""
    from starlette.applications import Starlette

    from bodega.runtime.serve import serve
    from bodega.wire.internal.worker_client import WorkerClient

    worker_api = await serve(Starlette(routes=routes), "127.0.0.1", 0)
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    for machine in machines:
        table.put_machine(machine.id, machine)
    worker = WorkerClient(worker_api.url)
    try:
        yield StandIn(table, Waker(table, lambda _w: worker, load, metrics, "ams"), load,
                      metrics)
    finally:
        await worker.aclose()
        await worker_api.stop()


@contextlib.asynccontextmanager
async def proxied_m1(plane: str, port: int, show: Any,
                     start: Any) -> AsyncIterator[tuple[StandIn, httpx.AsyncClient]]:
    """m1 started on ``port``, as the view last heard, behind the proxy on ``plane``; its
    worker answers a look at it with ``show`` and a start with ``start``."""
    from starlette.routing import Route

    async with stand_in_worker(
            [Route("/v1/machines/{id}", show, methods=["GET"]),
             Route("/v1/machines/{id}/start", start, methods=["POST"])],
            routed(machine_doc("m1", port))) as w, \
            serving(plane, w.table, w.waker, w.load, w.metrics) as served, \
            client(served.url) as http:
        yield w, http


async def _free_port() -> int:
    """A port free now and outside the kernel's ephemeral range, so no outgoing connection
    of the busy host takes it before the stand-in binds it (``tests/ports_kit.py``); the one
    after it too, which the sleeping-app test gives its second machine."""
    while True:
        port = free_port()
        if is_free(port + 1):
            return port


@pytest.mark.parametrize("plane", PLANES)
async def test_a_request_right_after_a_stop_waits_for_it_and_starts_the_machine_again(
        plane: str) -> None:
    """The view still says started (a stop is heard a gossip round later) and the worker
    says stopping: the request is neither refused nor sent to a dead port; once the worker
    says stopped, the machine is started for it. On the HAProxy plane, the refused connect
    marks the server down and the retry goes to the activator, which does the same."""
    from starlette.responses import JSONResponse

    machine = Machine("restarted")
    port = await _free_port()
    looks: list[str] = []
    starts: list[str] = []

    async def show(request: Any) -> JSONResponse:
        state = "stopping" if len(looks) < 3 else "stopped"
        looks.append(state)
        return JSONResponse(machine_doc("m1", port, state=state))

    async def start(request: Any) -> JSONResponse:
        starts.append(request.path_params["id"])
        machine.server = await asyncio.start_server(machine.handle, "127.0.0.1", port)
        return JSONResponse({"previous_state": "stopped", "migrated": False, "new_host": ""})

    try:
        async with proxied_m1(plane, port, show, start) as (_, http):
            answer = await http.get("/")
            assert answer.status_code == 200, answer.text
            assert answer.text.split()[0] == "restarted"
            assert starts == ["m1"]
            assert looks[:3] == ["stopping"] * 3
    finally:
        await machine.stop()
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("plane", PLANES)
async def test_a_request_to_a_machine_still_binding_its_port_waits_for_it(plane: str) -> None:
    """The view and the worker both say started, but the program has not bound its port
    yet (a machine just started): the request waits for that machine and is answered by it,
    nothing is started, and while it waits the machine counts as busy (autostop spares it)."""
    from starlette.responses import JSONResponse

    machine = Machine("late")
    port = await _free_port()
    looks: list[str] = []
    starts: list[str] = []
    busy: list[int] = []

    async def show(request: Any) -> JSONResponse:
        looks.append("started")
        return JSONResponse(machine_doc("m1", port))

    async def start(request: Any) -> JSONResponse:
        starts.append(request.path_params["id"])
        return JSONResponse({"previous_state": "started", "migrated": False, "new_host": ""})

    async def bind_once_waited_on(load: Load) -> None:
        """Binds the port only once the proxy, refused and told started, waits on it."""
        for _ in range(400):
            if looks and load.outstanding.get("m1"):
                busy.append(load.outstanding["m1"])
                machine.server = await asyncio.start_server(machine.handle, "127.0.0.1", port)
                return
            await asyncio.sleep(0.05)

    try:
        async with proxied_m1(plane, port, show, start) as (w, http):
            binder = asyncio.create_task(bind_once_waited_on(w.load))
            answer = await http.get("/")
            await binder
            assert answer.status_code == 200, answer.text
            assert answer.text.split()[0] == "late"
            assert busy == [1]
            assert starts == []
    finally:
        await machine.stop()
        await asyncio.sleep(0.05)
