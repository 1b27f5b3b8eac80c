"""The proxy's region first, and a machine that stops answering, on both data planes.

The proxy is in ams. Machines are small HTTP servers on loopback that answer
with their name (``/hold`` waits until the test lets it go, so a machine can be
kept at its hard limit), put into the routing table with a region each. A
machine whose host stopped answering is a listening socket whose accept queue
is full: the kernel drops the SYNs sent to it, as a host whose link went down
does, and a connect to it waits for nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from bodega.proxy.http1 import read_head
from bodega.proxy.load import Load
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.routes import RoutingTable
from bodega.proxy.wake import Waker

from .plane_kit import Serving, serving
from .test_forwarding import machine_doc, routed

CLIENT_TIMEOUT = 2.0  # what a client gives a request before it calls it failed


@dataclass
class Named:
    """A machine that answers with its name; ``/hold`` answers once ``release`` is set."""

    name: str
    release: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0
    server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (head := await read_head(reader)) is not None:
                if head.start[1] == b"/hold":
                    self.held += 1
                    await self.release.wait()
                body = self.name.encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 2)


@contextlib.contextmanager
def unanswering() -> Iterator[int]:
    """A port on loopback where connects get no answer: a listener that never accepts,
    its one-connection queue taken, so the kernel drops every SYN that comes after."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = int(listener.getsockname()[1])
    filler = socket.socket()
    filler.connect(("127.0.0.1", port))
    try:
        yield port
    finally:
        filler.close()
        listener.close()


def doc(name: str, port: int, region: str, hard_limit: int | None = None,
        state: str = "started") -> Any:
    row = machine_doc(name, port, region=region, state=state)
    if hard_limit is not None:
        row["config"]["services"][0]["concurrency"] = {
            "type": "requests", "soft_limit": hard_limit, "hard_limit": hard_limit}
    return routed(row)


@dataclass
class Regions:
    table: RoutingTable
    served: Serving
    http: httpx.AsyncClient

    async def put(self, name: str, port: int, region: str, **kw: Any) -> None:
        self.table.put_machine(name, doc(name, port, region, **kw))
        await self.served.synced()

    async def answered(self, count: int, path: str = "/") -> Counter[str]:
        """Which machines answered ``count`` requests sent one after another."""
        names: Counter[str] = Counter()
        for _ in range(count):
            answer = await self.http.get(path)
            assert answer.status_code == 200, answer.text
            names[answer.text] += 1
        return names


@contextlib.asynccontextmanager
async def regions(plane: str) -> AsyncIterator[Regions]:
    table, load, metrics = RoutingTable(), Load(), ProxyMetrics()
    waker = Waker(table, lambda _w: None, load, metrics, "ams")
    async with serving(plane, table, waker, load, metrics) as served, \
            httpx.AsyncClient(base_url=served.url, headers={"host": "web.localhost"},
                              timeout=CLIENT_TIMEOUT) as http:
        yield Regions(table, served, http)


async def test_the_proxys_own_region_serves_while_it_has_room(plane: str) -> None:
    ams, syd, lon = Named("ams-1"), Named("syd-1"), Named("lon-1")
    try:
        async with regions(plane) as r:
            await r.put("syd-1", await syd.start(), "syd")
            await r.put("lon-1", await lon.start(), "lon")
            assert set(await r.answered(10)) == {"syd-1", "lon-1"}  # none here: the others
            await r.put("ams-1", await ams.start(), "ams", hard_limit=1)
            assert await r.answered(30) == {"ams-1": 30}

            # Full: one request held at ams-1's hard limit; the others serve the rest.
            held = asyncio.create_task(r.http.get("/hold", timeout=30))
            while not ams.held:
                await asyncio.sleep(0.01)
            spilled = await r.answered(10)
            assert set(spilled) <= {"syd-1", "lon-1"}, spilled
            ams.release.set()
            assert (await held).text == "ams-1"
            assert await r.answered(10) == {"ams-1": 10}  # room again: its own region

            # Stopped: the others serve.
            r.table.put_machine("ams-1", doc("ams-1", 1, "ams", state="stopped"))
            await r.served.synced()
            assert set(await r.answered(10)) <= {"syd-1", "lon-1"}
    finally:
        for machine in (ams, syd, lon):
            await machine.stop()


async def test_a_machine_that_stops_answering_costs_no_request(plane: str) -> None:
    """Two machines here, one of them on a host that stopped answering; one elsewhere.
    Every request is answered within the client's patience, by another machine."""
    good, far = Named("ams-ok"), Named("syd-ok")
    try:
        with unanswering() as dead:
            async with regions(plane) as r:
                await r.put("ams-dead", dead, "ams")
                await r.put("ams-ok", await good.start(), "ams")
                await r.put("syd-ok", await far.start(), "syd")
                # One after another, and some at once: each that goes to ams-dead first
                # must be retried on another machine in time.
                answered = await r.answered(10)
                together = await asyncio.gather(*(r.http.get("/") for _ in range(10)))
                assert [a.status_code for a in together] == [200] * 10
                answered += Counter(a.text for a in together)
                assert set(answered) <= {"ams-ok", "syd-ok"}
                assert "ams-ok" in answered  # its own region's machine that answers
                # ams-dead the only one here: the machine elsewhere takes its requests.
                r.table.put_machine("ams-ok", doc("ams-ok", 1, "ams", state="stopped"))
                await r.served.synced()
                assert await r.answered(10) == {"syd-ok": 10}
    finally:
        await good.stop()
        await far.stop()


async def test_a_burst_at_a_machine_whose_accept_queue_overflows_costs_no_request(
        plane: str) -> None:
    """A machine listening with a backlog of five (as Python's http.server does): a burst
    of connects overflows its accept queue, and the kernel drops SYNs as for a host that
    stopped answering. It is the only machine, so its connects are given the time TCP
    takes to send a SYN again."""
    machine = Named("only")
    try:
        async with regions(plane) as r:
            machine.server = await asyncio.start_server(machine.handle, "127.0.0.1", 0,
                                                        backlog=5)
            await r.put("only", int(machine.server.sockets[0].getsockname()[1]), "ams")
            answers = await asyncio.gather(*(r.http.get("/", timeout=10) for _ in range(30)))
            assert [a.text for a in answers] == ["only"] * 30
    finally:
        await machine.stop()
