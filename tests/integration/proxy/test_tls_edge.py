"""The TLS edge on a real HAProxy: certificates by SNI from the cluster CA, swapped with no
reload, force_https, h2 by ALPN, the headers machines get, WebSockets over TLS."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bodega.proxy.core.routes import RoutingTable

from .edge_kit import Edge, curl, edge, names, served_certificate
from .test_forwarding import Machine, machine_doc, routed


def https_doc(mid: str, port: int, force_https: bool = False) -> dict[str, Any]:
    doc = machine_doc(mid, port)
    doc["config"]["services"][0]["ports"] = [
        {"port": 80, "handlers": ["http"], "force_https": force_https},
        {"port": 443, "handlers": ["tls", "http"]}]
    return doc


async def test_sni_picks_the_certificate_and_the_chain_verifies_against_the_cluster_ca(
        tmp_path: Path) -> None:
    machine = Machine("m1")
    table = RoutingTable()
    table.put_machine("m1", routed(https_doc("m1", await machine.start())))
    try:
        async with edge(table, tmp_path) as e:
            # As a broker issues every app: its own name (a *.localhost wildcard is not valid
            # for web.localhost to OpenSSL: one label under the star is too few).
            e.put("web", "web.localhost", e.ca.row("web", "web.localhost",
                                                   ("web.localhost", "*.web.localhost")))
            e.put("web", "www.example.com", e.ca.row("web", "www.example.com"))
            await e.synced()
            default = await served_certificate(e.tls_port, "other.localhost", e.ca.path)
            assert names(default) == ["*.localhost", "localhost"]
            app = await served_certificate(e.tls_port, "web.localhost", e.ca.path)
            assert names(app) == ["web.localhost", "*.web.localhost"]
            own = await served_certificate(e.tls_port, "www.example.com", e.ca.path)
            assert names(own) == ["www.example.com"]
            # curl checks the name too: the app at its own name, and at the certificate's.
            for host in ("web.localhost", "www.example.com"):
                code, out, err = await curl(
                    "--cacert", str(e.ca.path), "--resolve", f"{host}:{e.tls_port}:127.0.0.1",
                    f"https://{host}:{e.tls_port}/hello")
                assert code == 0, err
                assert out.startswith("m1 GET /hello")
            seen = machine.seen[-1]
            assert seen["x-forwarded-proto"] == "https"
            assert seen["x-forwarded-port"] == str(e.tls_port)
            assert seen["fly-client-ip"] == "127.0.0.1"
            assert seen["fly-region"] == "ams"
            assert seen["x-forwarded-for"] == "127.0.0.1"
            assert seen["fly-request-id"]
    finally:
        await machine.stop()


async def test_certificates_are_added_renewed_and_removed_with_no_reload_and_no_dropped_connection(
        tmp_path: Path) -> None:
    machine = Machine("m1")
    table = RoutingTable()
    table.put_machine("m1", routed(https_doc("m1", await machine.start())))
    try:
        async with edge(table, tmp_path) as e:
            pid = await e.dataplane.api.worker_pid()
            e.put("web", "web.localhost", e.ca.row("web", "web.localhost"))
            await e.synced()
            context = ssl.create_default_context(cafile=str(e.ca.path))
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", e.tls_port, ssl=context, server_hostname="web.localhost")

            async def ask() -> bytes:
                writer.write(b"GET /again HTTP/1.1\r\nHost: web.localhost\r\n\r\n")
                await writer.drain()
                return await reader.readuntil(b"/again")

            assert b"200 OK" in await ask()
            e.put("web", "api.example.com", e.ca.row("web", "api.example.com"))
            await e.synced()
            first = await served_certificate(e.tls_port, "api.example.com", e.ca.path)
            assert names(first) == ["api.example.com"]
            assert b"200 OK" in await ask()  # the connection opened before is still served

            e.put("web", "api.example.com", e.ca.row("web", "api.example.com"))  # renewed
            await e.synced()
            second = await served_certificate(e.tls_port, "api.example.com", e.ca.path)
            assert second.serial_number != first.serial_number

            e.put("web", "api.example.com", None)
            await e.synced()
            gone = await served_certificate(e.tls_port, "api.example.com", e.ca.path)
            assert names(gone) == ["*.localhost", "localhost"]
            assert b"200 OK" in await ask()
            writer.close()
            assert e.dataplane.process.reloads == 0
            assert await e.dataplane.api.worker_pid() == pid
            # What a later reload would read is what HAProxy holds now.
            assert "api.example.com" not in e.dataplane.settings.crt_list.read_text()
    finally:
        await machine.stop()


async def test_force_https_answers_301_to_the_same_url_over_tls(tmp_path: Path) -> None:
    machine = Machine("m1")
    table = RoutingTable()
    port = await machine.start()
    table.put_machine("m1", routed(https_doc("m1", port, force_https=True)))
    try:
        async with edge(table, tmp_path) as e:
            e.put("web", "web.localhost", e.ca.row("web", "web.localhost"))
            await e.synced()
            code, out, err = await curl("-o", "/dev/null", "-w",
                                        "%{http_code} %{redirect_url}",
                                        f"http://web.localhost:{e.http_port}/a/b?c=d")
            assert code == 0, err
            assert out == f"301 https://web.localhost:{e.tls_port}/a/b?c=d"
            code, out, err = await curl("-L", "--cacert", str(e.ca.path),
                                        f"http://web.localhost:{e.http_port}/follow")
            assert code == 0, err
            assert out.startswith("m1 GET /follow")
            # Without force_https the app answers over plain HTTP.
            table.put_machine("m1", routed(https_doc("m1", port)))
            await e.synced()
            code, out, err = await curl(f"http://web.localhost:{e.http_port}/plain")
            assert out.startswith("m1 GET /plain"), err
    finally:
        await machine.stop()


async def test_h2_by_alpn_with_curl_http2(tmp_path: Path) -> None:
    machine = Machine("m1")
    table = RoutingTable()
    table.put_machine("m1", routed(https_doc("m1", await machine.start())))
    try:
        async with edge(table, tmp_path) as e:
            e.put("web", "web.localhost", e.ca.row("web", "web.localhost"))
            await e.synced()
            code, out, err = await curl(
                "--http2", "--cacert", str(e.ca.path), "-w", "\n%{http_version}",
                "-d", "x" * 1000, f"https://web.localhost:{e.tls_port}/h2")
            assert code == 0, err
            body, version = out.rsplit("\n", 1)
            assert version == "2"
            assert body.startswith("m1 POST /h2 1000")
            code, out, err = await curl(
                "--http1.1", "--cacert", str(e.ca.path), "-w", "\n%{http_version}",
                f"https://web.localhost:{e.tls_port}/h1")
            assert out.rsplit("\n", 1)[1] == "1.1", err
    finally:
        await machine.stop()


@pytest.mark.parametrize("seconds", [5.0])
async def test_a_websocket_over_tls_carries_traffic_both_ways_for_its_whole_life(
        tmp_path: Path, seconds: float) -> None:
    """A WebSocket echo through the TLS edge for ``seconds`` of steady traffic (the issue
    asks 60 s; 5 s keeps the suite short and still crosses many exchanges on one upgrade)."""
    from websockets.asyncio.client import connect
    from websockets.asyncio.server import ServerConnection, serve

    async def echo(ws: ServerConnection) -> None:
        async for message in ws:
            await ws.send(message)

    async with serve(echo, "127.0.0.1", 0) as server:
        port = next(iter(server.sockets)).getsockname()[1]
        table = RoutingTable()
        table.put_machine("m1", routed(https_doc("m1", port)))
        async with edge(table, tmp_path) as e:
            e.put("web", "web.localhost", e.ca.row("web", "web.localhost"))
            await e.synced()
            context = ssl.create_default_context(cafile=str(e.ca.path))
            sent = 0
            async with connect(f"wss://web.localhost:{e.tls_port}/ws", ssl=context,
                               host="127.0.0.1", port=e.tls_port,
                               server_hostname="web.localhost") as ws:
                loop = asyncio.get_running_loop()
                deadline = loop.time() + seconds
                while loop.time() < deadline:
                    message = f"ping {sent} " + "x" * (sent % 3000)
                    await ws.send(message)
                    assert await asyncio.wait_for(ws.recv(), 5) == message
                    sent += 1
                    await asyncio.sleep(0.02)
            assert sent > 50


def test_the_python_data_plane_refuses_tls_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bodega", "proxy", "--data-dir", str(tmp_path), "--region", "ams",
         "--data-plane", "python", "--listen", "127.0.0.1:0", "--tls-listen", "127.0.0.1:0",
         "--internal-tls", "off"], capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, "BODEGA_GOSSIP_SECRET": "s"})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "Error: --tls-listen needs the haproxy data plane (asked for with --data-plane python); "
        "the python data plane serves plain HTTP only"]


async def test_fly_force_instance_id_reaches_that_machine_on_haproxy(tmp_path: Path) -> None:
    machines = [Machine("m1"), Machine("m2")]
    table = RoutingTable()
    for machine in machines:
        table.put_machine(machine.name, routed(https_doc(machine.name, await machine.start())))
    try:
        async with edge(table, tmp_path) as e:
            for _ in range(4):
                _, out, err = await curl("-H", "fly-force-instance-id: m2",
                                            f"http://web.localhost:{e.http_port}/forced")
                assert out.startswith("m2 GET /forced"), (out, err)
            _code, out, _ = await curl("-H", "fly-force-instance-id: nope",
                                      f"http://web.localhost:{e.http_port}/forced")
            assert "no machine nope in web" in out
    finally:
        for machine in machines:
            await machine.stop()


def _resumed(port: int, ca: Path, version: ssl.TLSVersion) -> bool:
    """Whether a second connection resumed the first's TLS session (a request on each)."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    context.minimum_version = context.maximum_version = version
    session = None
    reused = []
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                context.wrap_socket(raw, server_hostname="web.localhost",
                                    session=session) as tls:
            tls.sendall(b"GET / HTTP/1.1\r\nHost: web.localhost\r\nConnection: close\r\n\r\n")
            while tls.recv(65536):  # TLS 1.3 sends its tickets after the handshake
                pass
            reused.append(tls.session_reused)
            session = tls.session
    return reused == [False, True]


def _cipher(port: int, ca: Path) -> str:
    """The TLS 1.3 suite a client that offers AES-256-GCM first (OpenSSL's order) gets."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="web.localhost") as tls:
        cipher = tls.cipher()
        assert cipher is not None
        return cipher[0]


@contextlib.asynccontextmanager
async def one_machine(tmp_path: Path) -> AsyncIterator[Edge]:
    """An edge routing web.localhost to one machine ``m1``."""
    machine = Machine("m1")
    table = RoutingTable()
    table.put_machine("m1", routed(https_doc("m1", await machine.start())))
    try:
        async with edge(table, tmp_path) as e:
            yield e
    finally:
        await machine.stop()


async def test_the_edge_picks_aes_128_gcm_whatever_the_clients_order(tmp_path: Path) -> None:
    async with one_machine(tmp_path) as e:
        assert await asyncio.to_thread(_cipher, e.tls_port, e.ca.path) == \
            "TLS_AES_128_GCM_SHA256"


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2],
                         ids=["tls1.3", "tls1.2"])
async def test_a_client_resumes_its_tls_session_by_ticket(tmp_path: Path,
                                                          version: ssl.TLSVersion) -> None:
    async with one_machine(tmp_path) as e:
        assert await asyncio.to_thread(_resumed, e.tls_port, e.ca.path, version)
