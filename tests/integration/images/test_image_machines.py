"""Image machines on a real worker: a real registry, runc, overlay roots, netns."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx

from bodega.model.machine import Machine
from bodega.wire.internal.worker_client import WorkerClient
from tests.cidr_kit import held_octet

from ..daemon_kit import running_worker_daemon
from .image_kit import build_image, needs_image_tools, registry

pytestmark = needs_image_tools


def subnet() -> str:
    return f"10.{held_octet('images', 248, 252)}.{os.getpid() % 250 + 2}.0/24"


def worker_args(host: str, *more: str) -> dict[str, Any]:
    return {"driver": "auto", "extra": ("--image-registry", host, "--machine-subnet", subnet(),
                                        *more)}


async def fetch(url: str, timeout: float = 30.0) -> str:
    deadline = asyncio.get_running_loop().time() + timeout
    async with httpx.AsyncClient() as client:
        while True:
            try:
                return (await client.get(url, timeout=2)).text
            except httpx.HTTPError:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.05)


async def image_machine(client: WorkerClient, image: str) -> Machine:
    machine = await client.create_machine({"app": "img", "config": {
        "image": image, "guest": {"cpus": 1, "memory_mb": 256},
        "env": {"FROM_CONFIG": "1"}}})
    await client.wait(machine.id, "started", timeout=60)
    return await client.machine(machine.id)


def mounts() -> str:
    return Path("/proc/self/mountinfo").read_text()


async def test_an_image_machine_serves_runs_exec_and_shares_its_base(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/web:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            first = await image_machine(client, image)
            assert first.state == "started", first
            page = await fetch(f"http://{first.private_ip}:8080/index.html")
            assert page == "hello from an image\n"

            done = await client.call("POST", first.id, "exec", json={
                "command": ["/bin/sh", "-c", "echo $FROM_IMAGE $FROM_CONFIG; cat index.html; "
                            "hostname; touch /written"]})
            assert done["exit_code"] == 0, done
            assert done["stdout"].splitlines() == ["yes 1", "hello from an image",
                                                   first.id]

            second = await image_machine(client, image.rsplit(":", 1)[0] + ":v1")
            data = tmp_path / "w1"
            bases = [p for p in (data / "images" / "bases").iterdir()]
            assert len(bases) == 1, "two machines of one image share one unpacked base"
            lower = str(bases[0] / "rootfs")
            for machine in (first, second):
                rootfs = data / "machines" / machine.id / "oci" / "rootfs"
                assert f"lowerdir={lower}" in mounts()
                assert rootfs.is_mount()
            # A write lands in the machine's own upper layer, never in the shared base.
            assert (data / "machines" / first.id / "oci" / "upper" / "written").exists()
            assert not (bases[0] / "rootfs" / "written").exists()
            assert await fetch(f"http://{second.private_ip}:8080/") == "hello from an image\n"

            for machine in (first, second):
                await client.stop(machine.id, signal="SIGTERM", timeout="5s")
                stopped = await client.wait(machine.id, "stopped", timeout=30)
                assert stopped.state == "stopped"
                rootfs = data / "machines" / machine.id / "oci" / "rootfs"
                assert not rootfs.is_mount(), "a stopped machine holds no mount"
            await client.start(first.id)
            await client.wait(first.id, "started", timeout=30)
            assert await fetch(f"http://{first.private_ip}:8080/index.html") == \
                "hello from an image\n"
            done = await client.call("POST", first.id, "exec",
                                     json={"command": ["ls", "/written"]})
            assert done["exit_code"] == 0, "what a machine wrote outlives a stop"
            for machine in (first, second):
                await client.destroy(machine.id, force=True)
                await client.wait(machine.id, "destroyed", timeout=30)
                assert not (data / "machines" / machine.id).exists()
            assert str(data / "machines") not in mounts()
