"""Suspend through a real worker's API when it holds both drivers: each machine's own freezer.

An image machine is paused with runc, a host-command machine frozen through
its cgroup; a start resumes each (the same process answers); a stop of a
suspended image machine thaws it first, and a suspend repeated is a no-op.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from bodega.wire.internal.worker_client import WorkerClient

from ..daemon_kit import running_worker_daemon
from .image_kit import build_image, needs_image_tools, registry
from .test_image_machines import fetch, image_machine, worker_args

pytestmark = needs_image_tools


async def answers(url: str) -> bool:
    try:
        async with httpx.AsyncClient() as http:
            await http.get(url, timeout=1.0)
    except httpx.HTTPError:
        return False
    return True


async def first_process(client: WorkerClient, mid: str) -> tuple[int, int]:
    """The pid and start time of the machine's oldest process: its program. httpd forks a
    child per request, which may still be closing its connection when ps looks."""
    listed = await client.call("GET", mid, "ps")
    assert listed, "ps listed no process"
    return min((p["stime"], p["pid"]) for p in listed)


async def test_suspend_and_resume_of_image_and_process_machines(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/nap:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            machine = await image_machine(client, image)
            mid = machine.id
            url = f"http://{machine.private_ip}:8080/index.html"
            assert await fetch(url) == "hello from an image\n"
            program = await first_process(client, mid)

            await client.suspend(mid)
            await client.wait(mid, "suspended", timeout=30)
            assert not await answers(url), "a suspended machine answered"
            await client.suspend(mid)  # already suspended: nothing happens
            assert (await client.start(mid)).previous_state == "suspended"
            await client.wait(mid, "started", timeout=30)
            assert await fetch(url) == "hello from an image\n"
            assert await first_process(client, mid) == program  # resumed, not started again

            await client.suspend(mid)
            await client.wait(mid, "suspended", timeout=30)
            await client.stop(mid, signal="SIGTERM", timeout="5s")
            stopped = await client.wait(mid, "stopped", timeout=30)
            assert stopped.state == "stopped"
            exit_event = (await client.call("GET", mid, "events"))[0]
            assert exit_event["type"] == "exit"

            plain = await client.create_machine({"app": "img", "config": {
                "image": "process", "guest": {"cpus": 1, "memory_mb": 128},
                "init": {"exec": ["sleep", "600"]}}})
            await client.wait(plain.id, "started", timeout=30)
            await client.suspend(plain.id)
            await client.wait(plain.id, "suspended", timeout=30)
            await client.start(plain.id)
            await client.wait(plain.id, "started", timeout=30)
            for victim in (mid, plain.id):
                await client.destroy(victim, force=True)
                await client.wait(victim, "destroyed", timeout=30)

