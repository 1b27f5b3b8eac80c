"""examples/echo deployed on a real `bodega up`: its page over HTTPS (plain HTTP answers 301),
and its TCP echo greeting the client by the address the PROXY protocol carried, through the
proxy, waking its stopped machine for a connection."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

from tests.cluster.deploy_kit import EXAMPLES, readable_dir, up_cluster
from tests.cluster.up_kit import free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root")


async def curl(*args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--max-time", "10", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


async def echo(port: int, line: bytes, context: object = None) -> list[bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(line)
        return [await asyncio.wait_for(reader.readline(), 60) for _ in range(2)]
    finally:
        writer.close()


async def test_the_echo_example_serves_https_and_a_tcp_service_that_wakes_its_machine(
        tmp_path: Path) -> None:
    tcp_port, tls_port = free_port(), free_port()
    with readable_dir() as where:
        app = where / "echo"
        shutil.copytree(EXAMPLES / "echo", app)
        toml = app / "bodega.toml"
        toml.write_text(toml.read_text().replace("port = 7007", f"port = {tcp_port}")
                        .replace("port = 7443", f"port = {tls_port}"))
        async with up_cluster(tmp_path, workers=1) as (cli, up):
            await cli.ok("deploy", "-c", str(toml))
            https = up.state()["proxy_tls_url"].rsplit(":", 1)[1]
            ca = str(up.data_dir / "ca.crt")

            async def page() -> str:
                _, out = await curl("--cacert", ca, f"https://echo.localhost:{https}/")
                return out

            for _ in range(100):
                if await page() == "echo's page, reached over https\n":
                    break
                await asyncio.sleep(0.2)
            assert await page() == "echo's page, reached over https\n"
            _, moved = await curl("-o", "/dev/null", "-w", "%{http_code} %{redirect_url}",
                                  f"{cli.proxy.replace('127.0.0.1', 'echo.localhost')}/x")
            assert moved == f"301 https://echo.localhost:{https}/x"
            assert await echo(tcp_port, b"hi\n") == [b"hello 127.0.0.1\n", b"hi\n"]
            # All stopped, a machine is started again by the next connection.
            for machine in await cli.machines("echo"):
                await cli.ok("machine", "stop", machine["id"], "--app", "echo")

            async def states() -> list[str]:
                return sorted(m["state"] for m in await cli.machines("echo"))

            for _ in range(100):
                if set(await states()) == {"stopped"}:
                    break
                await asyncio.sleep(0.2)
            assert set(await states()) == {"stopped"}
            assert await echo(tcp_port, b"again\n") == [b"hello 127.0.0.1\n", b"again\n"]
            assert "started" in await states()
