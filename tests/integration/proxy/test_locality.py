"""The proxy's region first, and a machine that stops answering, on both data planes.

The proxy is in ams. Machines are small HTTP/1.1 servers on loopback that
answer with their name and keep their connections open (``/hold`` waits until
the test lets it go, so a machine can be kept at its hard limit), put into the
routing table with a region each. A machine whose host stopped answering is a
listening socket whose accept queue is full: the kernel drops the SYNs sent to
it, as a host whose link went down does, and a connect to it waits for nothing.
For connections the proxy already holds, the machine is on a host of its own
(``far_host_kit.py``) whose link is cut: what is sent on them is never
acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from bodega.proxy.core.load import Load
from bodega.proxy.core.routes import ACK_TIMEOUT, RoutingTable
from bodega.proxy.haproxy.runtime import StatRow
from bodega.proxy.http1 import read_head
from bodega.proxy.metrics import ProxyMetrics
from bodega.proxy.wake import Waker
from tests.poll_kit import until

from .far_host_kit import far_host
from .plane_kit import Serving, serving
from .test_forwarding import machine_doc, routed

CLIENT_TIMEOUT = 2.0  # what a client gives a request before it calls it failed
SENT_AGAIN = "sent again"  # a client's count of requests it sent again on a new connection


@dataclass
class Named:
    """A machine that answers with its name; ``/hold`` answers once ``release`` is set."""

    name: str
    release: asyncio.Event = field(default_factory=asyncio.Event)
    held: int = 0
    accepted: int = 0
    methods: list[bytes] = field(default_factory=list)  # of the requests it was sent
    server: asyncio.Server | None = None
    open: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self, listener: socket.socket | None = None) -> int:
        """Serve on ``listener`` (a socket listening elsewhere), or on loopback."""
        if listener is None:
            self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        else:
            self.server = await asyncio.start_server(self.handle, sock=listener)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.open.add(writer)
        try:
            while (head := await read_head(reader)) is not None:
                self.methods.append(head.method)
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
            self.open.discard(writer)
            writer.close()

    async def stop(self) -> None:
        self.release.set()
        if self.server is not None:
            self.server.close()
        for writer in list(self.open):
            # Gone at once (a reset), not closing for minutes over a link that was cut: a
            # socket holds the network namespace it was made in.
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.close()
        if self.server is not None:
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
        state: str = "started", host: str = "127.0.0.1") -> Any:
    row = machine_doc(name, port, region=region, state=state)
    row["service_host"] = host
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
            await until(lambda: ams.held, what="the request held at ams-1")
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


async def test_a_host_that_stops_answering_costs_no_request_on_connections_held_to_it(
        plane: str) -> None:
    """Two machines of the proxy's region, one on another host; both answer HTTP/1.1 and
    keep their connections open, so the proxy holds idle ones to each. Clients keep
    sending on keep-alive connections of their own while that host's link goes down: a
    request sent on a connection held to it is never acknowledged, and is answered by the
    other machine within the client's patience.

    On HAProxy a later request of a client's connection is not kept for a retry (the copy
    costs every request: ``config.KEPT``), so HAProxy ends that connection with no answer
    and the client sends the request again, as browsers, curl and Go do; the Python plane
    sends it elsewhere itself."""
    gone, here = Named("gone"), Named("here")
    async with far_host() as far:
        try:
            async with regions(plane) as r:
                await r.put("gone", await gone.start(far.listen()), "ams", host=far.address)
                await r.put("here", await here.start(), "ams")
                seen: Counter[str] = Counter()
                cut = asyncio.Event()
                sending = asyncio.gather(*(client(r.served.url, seen, cut, after=20)
                                           for _ in range(4)))
                # Until both answered, the proxy holding connections open to each.
                await until(lambda: seen["gone"] >= 4 and seen["here"] >= 4 and gone.open
                            and here.open, what="both machines answering")
                await far.cut()
                cut.set()
                await sending
        finally:  # before the host goes: its sockets would keep its namespace
            await gone.stop()
            await here.stop()
    sent_again = seen.pop(SENT_AGAIN, 0)
    print(f"\n{plane}: answers {dict(seen)}, sent again {sent_again}")
    assert set(seen) == {"gone", "here"}, seen  # every request answered, in time
    if plane == "python":
        assert not sent_again


async def test_a_request_that_may_not_be_sent_twice_gets_a_502_when_its_host_stops_answering(
        plane: str) -> None:
    """A POST sent on a connection held to a host that has just stopped answering may have
    reached the machine all the same (a host acknowledges a request with its answer when
    that comes soon, and both were lost), so it goes to no other machine: the client gets
    a 502 once nothing was acknowledged for ``ACK_TIMEOUT``, instead of waiting for ever."""
    gone, elsewhere = Named("gone"), Named("elsewhere")
    async with far_host() as far:
        try:
            async with regions(plane) as r:
                await r.put("gone", await gone.start(far.listen()), "ams", host=far.address)
                await r.put("elsewhere", await elsewhere.start(), "syd")  # used when full
                assert await r.answered(3) == {"gone": 3}  # and a connection kept to it
                await far.cut()
                async with httpx.AsyncClient(base_url=r.served.url,
                                             headers={"host": "web.localhost"}) as web:
                    async with asyncio.timeout(CLIENT_TIMEOUT):
                        answer = await web.post("/")
        finally:
            await gone.stop()
            await elsewhere.stop()
    assert answer.status_code == 502, answer.text
    assert b"POST" not in elsewhere.methods


async def client(url: str, seen: Counter[str], cut: asyncio.Event, after: int) -> None:
    """Requests one after another on a keep-alive connection, until ``after`` of them were
    sent once ``cut`` is set: who answered each (or how it failed), in ``seen``.

    A request whose reused connection was closed with no answer is sent again on a new one,
    as browsers, curl and Go's client do; the client gives it ``CLIENT_TIMEOUT`` in all.
    """
    async with httpx.AsyncClient(base_url=url, headers={"host": "web.localhost"}) as web:
        while after:
            try:
                async with asyncio.timeout(CLIENT_TIMEOUT):
                    try:
                        answer = await web.get("/")
                    except httpx.RemoteProtocolError:
                        seen[SENT_AGAIN] += 1
                        answer = await web.get("/")
                seen[answer.text if answer.status_code == 200
                     else f"status {answer.status_code}"] += 1
            except (httpx.HTTPError, TimeoutError) as exc:
                seen[f"failed: {type(exc).__name__}"] += 1
            after -= cut.is_set()


async def test_one_connect_left_unanswered_does_not_take_a_machine_out_on_haproxy() -> None:
    """A burst that overflows a machine's accept queue drops SYNs as a lost host does. One
    connect HAProxy gives up on is retried on another machine and leaves its server up;
    the second in a row marks it down, so a host that stopped answering is out within a
    few requests. (Marked down at the first, a burst could take every machine of the
    proxy's region out at once, its app's traffic all through the activator.)"""
    full, other = Named("full"), Named("other")
    try:
        async with regions("haproxy") as r:
            assert r.served.dataplane is not None
            api = r.served.dataplane.api
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            # The machine serves on a copy of the socket: closing it stops the accepting,
            # while the socket goes on listening through this one.
            await r.put("full", await full.start(listener.dup()), "ams")
            await r.put("other", await other.start(), "ams")
            slot = next(key for key, (_, machine) in r.served.dataplane.layout.machines().items()
                        if machine == "full")

            async def row() -> StatRow:
                return next(s for s in await api.stats() if (s.proxy, s.server) == slot)

            assert (await row()).status == "UP"  # checked as it was readied: it accepted
            assert full.server is not None
            full.server.close()  # nothing accepts from now on
            listener.listen(0)  # a queue of one (asyncio asked for more), then SYNs dropped
            queued = socket.create_connection(listener.getsockname())  # the queue is full
            try:
                for gave_up in (1, 2):  # connects given up on (the server's redispatches)
                    while (await row()).redispatches < gave_up:
                        answer = await r.http.get("/")
                        assert answer.text == "other", answer.text  # each one retried
                    assert (await row()).status == ("UP" if gave_up == 1 else "DOWN"), gave_up
            finally:
                queued.close()
                listener.close()
    finally:
        await full.stop()
        await other.stop()


async def test_an_upload_a_machine_leaves_unread_a_while_is_not_cut_on_the_python_plane(
) -> None:
    """A machine that leaves a large body unread, its receive window closed, for longer
    than ``ACK_TIMEOUT`` is up all the same (its host acknowledges every probe of the
    window): the Python plane lifts the bound while a body goes out, and the upload is
    answered. (HAProxy 2.6 sets the bound per server, for a connection's whole life, and
    cuts such an upload: docs/proxy.md.)"""
    size = 32 * 2**20  # beyond what the sockets on either side of loopback buffer

    async def slow_reader(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await read_head(reader)
        assert head is not None
        await asyncio.sleep(2 * ACK_TIMEOUT)
        got = 0
        while got < head.content_length():  # type: ignore[operator]
            got += len(await reader.read(2**16))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%d"
                     % (len(str(got)), got))
        await writer.drain()
        writer.close()

    machine = await asyncio.start_server(slow_reader, "127.0.0.1", 0)
    try:
        async with regions("python") as r:
            await r.put("slow", int(machine.sockets[0].getsockname()[1]), "ams")
            answer = await r.http.post("/", content=b"x" * size, timeout=30)
            assert answer.status_code == 200, answer.text
            assert answer.text == str(size)
    finally:
        machine.close()
