"""`bodega port-forward` on a real `bodega up`: a local port carried to a machine's TCP port.

A machine runs a TCP echo server; the real command, a child process, listens on a
free local port and carries each connection through the broker's public API (a
WebSocket to the broker, relayed to the worker, which connects to the machine).
Real TCP clients send bytes and read them back: one, two at once, and a megabyte.
The forward route's refusals come before the upgrade, in the error shape (a client
of the `websockets` library reads them: no bodega code on that side). A connection
the machine resets is reset at the client too, and a forward to a stopped machine
closes the client's connection; each is said in one line, and the command runs on
until Ctrl-C, which ends it with exit code 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.cluster.deploy_kit import Cli, until, up_cluster
from tests.cluster.up_kit import free_port
from tests.python_kit import machine_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="bodega up with machines needs root")

PORT = 7007  # the echo server's, inside the machine
ECHO = f"""
import socket, struct, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("0.0.0.0", {PORT}))
server.listen(16)
print("listening", flush=True)
def echo(conn):
    with conn:
        while data := conn.recv(65536):
            if data == b"reset, please":  # closed with a reset, not a FIN
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            conn.sendall(data)
while True:
    conn, _ = server.accept()
    threading.Thread(target=echo, args=(conn,), daemon=True).start()
"""
MEGABYTE = os.urandom(1 << 20)


async def round_trip(port: int, payload: bytes) -> bytes:
    """Send ``payload`` through the forward and read as many bytes back, writing and reading
    at once (a megabyte does not fit the sockets' buffers)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async def send() -> None:
            writer.write(payload)
            await writer.drain()

        sent = asyncio.create_task(send())
        back = await asyncio.wait_for(reader.readexactly(len(payload)), 60)
        await sent
        return back
    finally:
        writer.close()


async def closed_at_once(port: int, payload: bytes = b"anyone there?") -> bool:
    """Whether a connection through the forward, sent ``payload``, is closed by it, nothing
    read."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(payload)
        return await asyncio.wait_for(reader.read(), 60) == b""
    except ConnectionResetError:
        return True
    finally:
        writer.close()


async def refusal(url: str, token: str | None) -> tuple[int, dict[str, Any]]:
    """The HTTP answer a WebSocket upgrade got instead of a WebSocket."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, additional_headers=headers, proxy=None, open_timeout=60):
            pass
    response = refused.value.response
    return response.status_code, json.loads(response.body)


async def line_of(stream: asyncio.StreamReader) -> str:
    return (await asyncio.wait_for(stream.readline(), 60)).decode().rstrip("\n")


@contextlib.asynccontextmanager
async def forwarding(cli: Cli, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    """``bodega port-forward ARGS`` running, killed on leaving if it has not ended."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bodega", "port-forward", *args, env=cli.env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_port_forward_carries_tcp_to_a_machine_and_outlives_a_refusal(
        tmp_path: Path) -> None:
    async with up_cluster(tmp_path, workers=1) as (cli, _up):
        await cli.ok("apps", "create", "pf")
        await cli.ok("apps", "create", "other")
        made = json.loads(await cli.ok("machine", "run", "-a", "pf", "--json", "--",
                                       machine_python(), "-c", ECHO))
        machine_id, private_ip = made["id"], made["private_ip"]
        assert made["state"] == "started"

        async def listening() -> bool:
            code, out, _ = await cli.run("logs", "-a", "pf", "--json")
            return code == 0 and "listening" in out

        await until(listening)

        # -- the route's refusals, before any upgrade ------------------------------------
        api, admin = cli.env["BODEGA_API_URL"], cli.env["BODEGA_API_TOKEN"]
        ws = api.replace("http://", "ws://") + "/v1/apps/{app}/machines/{id}/forward?port={port}"
        mine = ws.format(app="pf", id=machine_id, port=PORT)
        assert await refusal(mine, None) == (401, {
            "error": "unauthorized: send Authorization: Bearer <token>",
            "status": "unauthenticated"})
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {admin}"}) as http:
            made_token = await http.post(f"{api}/v1/apps/other/deploy_token", json={})
            others = made_token.json()["token"]
            # A request without the upgrade is told what the route needs, not "no route".
            plain = await http.get(f"{api}/v1/apps/pf/machines/{machine_id}/forward",
                                   params={"port": PORT})
            assert (plain.status_code, plain.json()["status"]) == (400, "invalid_argument")
            assert "is a WebSocket" in plain.json()["error"]
        status, body = await refusal(mine, others)  # a token of another app sees no pf
        assert (status, body["status"]) == (404, "not_found"), body
        assert "pf" in body["error"]
        status, body = await refusal(ws.format(app="pf", id=machine_id, port="0"), admin)
        assert (status, body["status"]) == (400, "invalid_argument"), body
        assert "port must be a number from 1 to 65535" in body["error"]
        status, body = await refusal(ws.format(app="pf", id="0" * 14, port=PORT), admin)
        assert (status, body["status"]) == (404, "not_found"), body
        status, body = await refusal(ws.format(app="pf", id=machine_id, port=PORT + 1), admin)
        assert (status, body["status"]) == (503, "unavailable"), body
        assert f"no connection to machine {machine_id} port {PORT + 1}: connection refused" \
            in body["error"]

        # -- the command: bytes there and back -------------------------------------------
        local = free_port()
        async with forwarding(cli, f"{local}:{PORT}", "-a", "pf") as process:
            assert process.stdout is not None
            assert process.stderr is not None
            said = await line_of(process.stdout)
            assert said == (f"Proxying 127.0.0.1:{local} to machine {machine_id} "
                            f"({private_ip}) port {PORT} of app pf")
            assert await round_trip(local, b"hello, machine") == b"hello, machine"
            one, two = await asyncio.gather(round_trip(local, b"one" * 1000),
                                            round_trip(local, b"two" * 2000))
            assert (one, two) == (b"one" * 1000, b"two" * 2000)
            assert await round_trip(local, MEGABYTE) == MEGABYTE

            # -- a connection the machine resets: reset here too, and said -----------------
            assert await closed_at_once(local, b"reset, please")
            line = await line_of(process.stderr)
            assert re.fullmatch(
                rf"connection from 127\.0\.0\.1:\d+ closed: the connection to machine "
                rf"{machine_id} port {PORT}: connection reset by peer", line), line
            assert await round_trip(local, b"still there") == b"still there"

            # -- a stopped machine: each connection closed and said, the command runs on --
            await cli.ok("machine", "stop", machine_id, "-a", "pf")

            async def stopped() -> bool:
                shown = await cli.json("machine", "status", machine_id, "-a", "pf")
                return bool(shown["state"] == "stopped")

            await until(stopped)
            for _ in range(2):
                assert await closed_at_once(local)
                line = await line_of(process.stderr)
                assert re.fullmatch(
                    rf"connection from 127\.0\.0\.1:\d+ closed: failed_precondition: machine "
                    rf"{machine_id} is stopped, not started: start it to forward a port to it",
                    line), line
                assert process.returncode is None

            process.send_signal(signal.SIGINT)
            code = await asyncio.wait_for(process.wait(), 60)
            assert code == 0, await process.stderr.read()  # Ctrl-C is how it ends
            assert await process.stderr.read() == b""  # nothing more was said
