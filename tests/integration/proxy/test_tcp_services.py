"""[[services]] beyond HTTP on a real HAProxy: raw TCP passed through, TLS ended at the edge,
PROXY protocol v1 and v2 telling the machine who the client is, and a stopped machine woken by
a connection (one start for a burst of them)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bodega.model.machine import Machine
from bodega.proxy.autostop import Autostop
from bodega.proxy.core.load import Load
from bodega.proxy.core.proxy_protocol import V2_HEADER, Addresses, encode, parse_v2, v2_length
from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.core.tcp_routes import AllServices, Entries, TcpTable
from bodega.proxy.core.tcp_routes import listeners_of as machine_listeners
from bodega.proxy.haproxy.observed import CombinedLoad
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.tcp_activator import TcpActivator
from bodega.proxy.wake import Waker
from bodega.runtime.serve import serve
from bodega.wire.internal.worker_client import WorkerClient

from .edge_kit import edge, free_tcp_port
from .test_forwarding import routed
from .test_locality import unanswering


def listeners_of(row: dict[str, Any] | None) -> Entries:
    """The listeners of a machine row as the proxy reads it from the view."""
    return machine_listeners(Machine.model_validate(row) if row is not None else None)


def tcp_doc(mid: str, internal: int, public: int, *, handlers: list[str] | None = None,
            version: str | None = None, state: str = "started") -> dict[str, Any]:
    port: dict[str, Any] = {"port": public, "handlers": handlers or []}
    if version:
        port["proxy_proto_options"] = {"version": version}
    return {"id": mid, "app": "echo", "region": "ams", "worker": "w1", "state": state,
            "service_host": "127.0.0.1", "created_at": mid,
            "config": {"image": "echo", "services": [
                {"protocol": "tcp", "internal_port": internal, "autostart": True,
                 "ports": [port]}]}}


class Echo:
    """A TCP echo machine; with ``proxy``, it first reads a PROXY header and answers the
    client address it names."""

    def __init__(self, proxy: int = 0) -> None:
        self.proxy = proxy
        self.server: asyncio.Server | None = None
        self.connections = 0
        self.received = 0  # bytes, over every connection

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            if self.proxy == 1:
                writer.write(b"from " + (await reader.readline()).strip() + b"\n")
            elif self.proxy == 2:
                head = await reader.readexactly(V2_HEADER)
                found = parse_v2(head, await reader.readexactly(v2_length(head)))
                writer.write(f"from {found.source}\n".encode())
            while data := await reader.read(65536):
                self.received += len(data)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()


async def round_trip(port: int, payload: bytes, context: ssl.SSLContext | None = None
                     ) -> tuple[bytes, tuple[str, int]]:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="echo.localhost" if context else None)
    local = writer.get_extra_info("sockname")[:2]
    writer.write(payload)
    await writer.drain()
    got = await asyncio.wait_for(reader.readexactly(len(payload)), 30)
    writer.close()
    return got, local


@contextlib.asynccontextmanager
async def worker_api(starts: list[str]) -> AsyncIterator[WorkerClient]:
    """A stand-in worker that records the machines it is asked to start."""
    async def start(request: Request) -> JSONResponse:
        starts.append(request.path_params["id"])
        return JSONResponse({"previous_state": "stopped", "migrated": False, "new_host": ""})

    served = await serve(Starlette(routes=[
        Route("/v1/machines/{id}/start", start, methods=["POST"])]), "127.0.0.1", 0)
    client = WorkerClient(served.url)
    try:
        yield client
    finally:
        await client.aclose()
        await served.stop()


async def test_raw_tcp_passes_through_both_ways(tmp_path: Path) -> None:
    echo = Echo()
    public = free_tcp_port()
    tcp = TcpTable()
    tcp.put("m1", listeners_of(tcp_doc("m1", await echo.start(), public)))
    try:
        async with edge(RoutingTable(), tmp_path, tcp=tcp) as e:
            payload = os.urandom(4 * 1024 * 1024)
            got, _ = await round_trip(public, payload)
            assert got == payload
            assert echo.connections == 1
            assert e.dataplane.process.reloads == 0
    finally:
        echo.stop()


async def test_proxy_protocol_v1_and_v2_tell_the_machine_the_clients_address(
        tmp_path: Path) -> None:
    v1, v2 = Echo(proxy=1), Echo(proxy=2)
    p1, p2 = free_tcp_port(), free_tcp_port()
    tcp = TcpTable()
    tcp.put("m1", listeners_of(tcp_doc("m1", await v1.start(), p1, handlers=["proxy_proto"])))
    tcp.put("m2", listeners_of(tcp_doc("m2", await v2.start(), p2, handlers=["proxy_proto"],
                                       version="v2")))
    try:
        async with edge(RoutingTable(), tmp_path, tcp=tcp):
            reader, writer = await asyncio.open_connection("127.0.0.1", p1)
            sport = writer.get_extra_info("sockname")[1]
            writer.write(b"hi\n")
            assert await reader.readline() == \
                f"from PROXY TCP4 127.0.0.1 127.0.0.1 {sport} {p1}\n".encode()
            assert await reader.readline() == b"hi\n"
            writer.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", p2)
            sport = writer.get_extra_info("sockname")[1]
            assert await reader.readline() == f"from ('127.0.0.1', {sport})\n".encode()
            writer.close()
    finally:
        v1.stop()
        v2.stop()


async def test_the_tls_handler_ends_tls_at_the_edge_and_passes_bytes(tmp_path: Path) -> None:
    echo = Echo()
    public = free_tcp_port()
    tcp = TcpTable()
    tcp.put("m1", listeners_of(tcp_doc("m1", await echo.start(), public, handlers=["tls"])))
    try:
        async with edge(RoutingTable(), tmp_path, tcp=tcp) as e:
            e.put("echo", "echo.localhost", e.ca.row("echo", "echo.localhost"))
            await e.synced()
            context = ssl.create_default_context(cafile=str(e.ca.path))
            got, _ = await round_trip(public, b"over tls " * 1000, context)
            assert got == b"over tls " * 1000
    finally:
        echo.stop()


async def test_a_connection_wakes_a_stopped_machine_once_for_a_burst(tmp_path: Path) -> None:
    echo = Echo(proxy=2)  # the activator passes the client's address on too
    public = free_tcp_port()
    tcp = TcpTable()
    internal = await echo.start()  # its process is up: the stand-in worker only records
    tcp.put("m1", listeners_of(tcp_doc("m1", internal, public, handlers=["proxy_proto"],
                                       version="v2", state="stopped")))
    starts: list[str] = []
    try:
        async with worker_api(starts) as worker, \
                edge(RoutingTable(), tmp_path, tcp=tcp, worker=lambda _w: worker):

            async def one(i: int) -> None:
                reader, writer = await asyncio.open_connection("127.0.0.1", public)
                sport = writer.get_extra_info("sockname")[1]
                assert await asyncio.wait_for(reader.readline(), 30) == \
                    f"from ('127.0.0.1', {sport})\n".encode()
                writer.write(f"conn {i}\n".encode())
                assert await reader.readline() == f"conn {i}\n".encode()
                writer.close()

            await asyncio.gather(*(one(i) for i in range(10)))
            assert starts == ["m1"]
            assert echo.connections == 11  # the ten, and the waker's probe of the port
    finally:
        echo.stop()


async def test_a_new_listener_reloads_once_and_machines_after_it_are_runtime_commands(
        tmp_path: Path) -> None:
    first, second = Echo(), Echo()
    public = free_tcp_port()
    tcp = TcpTable()
    try:
        async with edge(RoutingTable(), tmp_path, tcp=tcp) as e:
            tcp.put("m1", listeners_of(tcp_doc("m1", await first.start(), public)))
            await e.synced()
            assert e.dataplane.process.reloads == 1
            assert (await round_trip(public, b"one"))[0] == b"one"
            tcp.put("m2", listeners_of(tcp_doc("m2", await second.start(), public)))
            tcp.put("m1", listeners_of(None))
            await e.synced()
            assert (await round_trip(public, b"two"))[0] == b"two"
            assert (first.connections, second.connections) == (1, 1)
            assert e.dataplane.process.reloads == 1
    finally:
        first.stop()
        second.stop()


async def test_a_woken_machine_with_an_http_service_too_gets_the_connection_on_its_tcp_port(
        tmp_path: Path) -> None:
    """The HTTP table knows the machine by its HTTP port; the connection must not go there."""
    echo, web = Echo(), Echo()
    public = free_tcp_port()
    row = tcp_doc("m1", await echo.start(), public, state="stopped")
    row["config"]["services"].insert(0, {"protocol": "tcp", "internal_port": await web.start(),
                                         "ports": [{"port": 80, "handlers": ["http"]}]})
    table, tcp = RoutingTable(), TcpTable()
    table.put_machine("m1", routed(row))
    tcp.put("m1", listeners_of(row))
    starts: list[str] = []
    try:
        async with worker_api(starts) as worker, \
                edge(table, tmp_path, tcp=tcp, worker=lambda _w: worker):
            assert (await round_trip(public, b"to the echo"))[0] == b"to the echo"
            assert starts == ["m1"]
            assert echo.connections == 2  # the waker's probe, then the client's
            # Nothing went to its HTTP port (the proxy may have tried that port once before
            # giving it an HTTP slot, admission.py, with no byte sent).
            assert web.received == 0
    finally:
        echo.stop()
        web.stop()


async def test_an_open_tcp_connection_is_load_on_its_machine_so_autostop_spares_it(
        tmp_path: Path) -> None:
    echo, web = Echo(), Echo()
    public = free_tcp_port()
    row = tcp_doc("m1", await echo.start(), public)
    row["config"]["services"].insert(0, {"protocol": "tcp", "internal_port": await web.start(),
                                         "ports": [{"port": 80, "handlers": ["http"]}]})
    table, tcp = RoutingTable(), TcpTable()
    table.put_machine("m1", routed(row))
    tcp.put("m1", listeners_of(row))
    try:
        async with edge(table, tmp_path, tcp=tcp) as e:
            reader, writer = await asyncio.open_connection("127.0.0.1", public)
            writer.write(b"held\n")
            assert await reader.readline() == b"held\n"
            await e.dataplane.observe()
            assert e.dataplane.load.outstanding.get("m1") == 1
            assert "m1" not in e.dataplane.load.idle_since
            writer.close()
    finally:
        echo.stop()
        web.stop()


async def test_an_idle_tcp_only_machine_is_stopped_and_a_connection_starts_it_again(
        tmp_path: Path) -> None:
    echo = Echo()
    public = free_tcp_port()
    row = tcp_doc("m1", await echo.start(), public)
    row["config"]["services"][0]["autostop"] = "stop"
    table, tcp = RoutingTable(), TcpTable()
    tcp.put("m1", listeners_of(row))
    calls: list[str] = []

    async def record(request: Request) -> JSONResponse:
        calls.append(f"{request.url.path.rsplit('/', 1)[1]} {request.path_params['id']}")
        return JSONResponse({"ok": True, "previous_state": "stopped"})

    served = await serve(Starlette(routes=[
        Route("/v1/machines/{id}/start", record, methods=["POST"]),
        Route("/v1/machines/{id}/stop", record, methods=["POST"])]), "127.0.0.1", 0)
    worker = WorkerClient(served.url)
    try:
        async with edge(table, tmp_path, tcp=tcp, worker=lambda _w: worker) as e:
            autostop = Autostop(AllServices(table, tcp),
                                CombinedLoad(Load(), e.dataplane.load),
                                lambda _w: worker, ProxyMetrics(), "ams", 3600, idle_for=0)
            reader, writer = await asyncio.open_connection("127.0.0.1", public)
            writer.write(b"busy\n")
            assert await reader.readline() == b"busy\n"
            await e.dataplane.observe()
            assert await autostop.tick() == []  # a connection is open: not idle
            writer.close()
            for _ in range(100):  # until HAProxy has seen the connection end
                await e.dataplane.observe()
                if not e.dataplane.load.outstanding.get("m1"):
                    break
                await asyncio.sleep(0.05)
            assert [b.machine_id for b in await autostop.tick()] == ["m1"]
            assert calls == ["stop m1"]
            await e.synced()
            assert (await round_trip(public, b"wake"))[0] == b"wake"
            assert calls == ["stop m1", "start m1"]
    finally:
        await worker.aclose()
        await served.stop()
        echo.stop()


async def test_the_tcp_activator_gives_a_machine_that_does_not_accept_up_for_the_next(
) -> None:
    """A machine whose host stopped answering (its SYNs dropped: a full accept queue here)
    is given ``CONNECT_TIMEOUT``, and the connection the activator holds goes to the next
    running machine, in well under a client's 2 s."""
    echo = Echo()
    public = free_tcp_port()
    table, tcp = RoutingTable(), TcpTable()
    activator = TcpActivator(tcp, table, Waker(table, lambda _w: None, Load(), ProxyMetrics(),
                                               "ams"), "ams")
    try:
        with unanswering() as dead:
            tcp.put("m1", listeners_of(tcp_doc("m1", dead, public)))  # first by id and region
            tcp.put("m2", listeners_of(tcp_doc("m2", await echo.start(), public)))
            ports = await activator.ensure({public})
            reader, writer = await asyncio.open_connection("127.0.0.1", ports[public])
            client = Addresses(("127.0.0.1", 40000), ("127.0.0.1", public))
            writer.write(encode(client, 2) + b"hello\n")
            async with asyncio.timeout(2):
                assert await reader.readline() == b"hello\n"
            writer.close()
            assert echo.connections == 1
    finally:
        await activator.close()
        echo.stop()
