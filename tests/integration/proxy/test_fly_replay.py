"""fly-replay on a real HAProxy: a machine's ``fly-replay: region=syd`` sends the request (its
method, headers and body) to a machine in syd, once, with ``fly-replay-src`` saying where it
came from; a target asking for a replay again is answered to the client as it is."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bodega.proxy.core.routes import RoutingTable
from bodega.proxy.http1 import read_head

from .edge_kit import curl, edge
from .test_forwarding import _Digest, machine_doc, read_body, routed


@dataclass
class Replaying:
    """A machine that answers ``/here`` itself and anything else with ``fly-replay``."""

    name: str
    replay: str
    seen: list[tuple[str, dict[str, str], int]] = field(default_factory=list)
    server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (head := await read_head(reader)) is not None:
                headers = {k.decode().lower(): v.decode() for k, v in head.headers}
                sink = _Digest()
                await read_body(head, reader, sink)
                path = head.start[1].decode()
                self.seen.append((f"{head.method.decode()} {path}", headers, sink.count))
                body = f"{self.name} {head.method.decode()} {path} {sink.count}".encode()
                extra = b"" if path.startswith("/here") else \
                    f"fly-replay: {self.replay}\r\n".encode()
                writer.write(b"HTTP/1.1 200 OK\r\n" + extra + b"x-answered-by: " +
                             self.name.encode() + b"\r\nContent-Length: " +
                             str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        if self.server is not None:
            self.server.close()


def doc(mid: str, port: int, region: str) -> dict[str, Any]:
    return machine_doc(mid, port, region=region)


async def test_fly_replay_goes_to_the_named_region_once_and_never_loops(tmp_path: Path) -> None:
    """Each machine sends the other's region back: whichever HAProxy picks first, the other
    answers, each sees the request once, and the second ask reaches the client unfollowed."""
    machines = {"ams": Replaying("ams-1", "region=syd;state=cart-42"),
                "syd": Replaying("syd-1", "region=ams;state=cart-42")}
    table = RoutingTable()
    for region, machine in machines.items():
        table.put_machine(machine.name, routed(doc(machine.name, await machine.start(), region)))
    try:
        async with edge(table, tmp_path, region="ams") as e:
            url = f"http://web.localhost:{e.http_port}"
            code, out, err = await curl("-D", "-", "-H", "x-custom: kept", "-d", "x" * 5000,
                                        f"{url}/checkout?item=3")
            assert code == 0, err
            first = next(m for m in machines.values() if m.seen)
            second = next(m for m in machines.values() if m is not first)
            assert out.endswith(f"{second.name} POST /checkout?item=3 5000")
            assert f"x-answered-by: {second.name}" in out
            assert f"fly-replay: {second.replay}" in out  # its own ask: not followed
            assert [s[0] for s in first.seen] == ["POST /checkout?item=3"]
            assert [s[0] for s in second.seen] == ["POST /checkout?item=3"]
            replayed = second.seen[0][1]
            region = "ams" if first.name == "ams-1" else "syd"
            assert replayed["fly-replay-src"] == f"instance={first.name};region={region};" \
                                                 "state=cart-42"
            assert replayed["x-custom"] == "kept"
            assert replayed["host"] == f"web.localhost:{e.http_port}"
            assert "x-bodega-replay" not in replayed
            # A client cannot send the instruction itself: the machine HAProxy picks answers.
            code, out, _ = await curl("-H", "x-bodega-replay: region=fra", f"{url}/here")
            answered = next(m for m in machines.values() if out.startswith(m.name))
            assert out == f"{answered.name} GET /here 0"
            assert "x-bodega-replay" not in answered.seen[-1][1]
            assert sum(len(m.seen) for m in machines.values()) == 3
    finally:
        for machine in machines.values():
            machine.stop()


async def test_a_replay_to_a_region_with_no_machine_is_a_clear_503(tmp_path: Path) -> None:
    ams = Replaying("ams-1", "region=fra")
    table = RoutingTable()
    table.put_machine("ams-1", routed(doc("ams-1", await ams.start(), "ams")))
    try:
        async with edge(table, tmp_path) as e:
            code, out, err = await curl("-s", "-w", "\n%{http_code}",
                                        f"http://web.localhost:{e.http_port}/go")
            assert code == 0, err
            body, status = out.rsplit("\n", 1)
            assert status == "503"
            assert "no machine the fly-replay names can serve" in body
    finally:
        ams.stop()


async def test_a_body_too_big_to_keep_is_not_replayed_and_the_machine_answers(
        tmp_path: Path) -> None:
    ams = Replaying("ams-1", "region=syd")
    syd = Replaying("syd-1", "region=ams")
    table = RoutingTable()
    table.put_machine("ams-1", routed(doc("ams-1", await ams.start(), "ams")))
    table.put_machine("syd-1", routed(doc("syd-1", await syd.start(), "syd")))
    try:
        async with edge(table, tmp_path) as e:
            code, out, err = await curl("-D", "-", "-d", "x" * 40000,
                                        f"http://web.localhost:{e.http_port}/big")
            assert code == 0, err
            first = ams if ams.seen else syd
            assert out.endswith(f"{first.name} POST /big 40000")
            assert f"fly-replay: {first.replay}" in out
            assert len(ams.seen) + len(syd.seen) == 1
    finally:
        ams.stop()
        syd.stop()
