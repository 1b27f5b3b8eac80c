"""Sandbox machines on a real worker: runsc, a real registry, overlay roots, the netns."""

from __future__ import annotations

import contextlib
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bodega.model.machine import Machine
from bodega.wire.internal.worker_client import WorkerClient
from tests.integration.daemon_kit import running_worker_daemon, worker_daemon
from tests.integration.images.image_kit import build_image, needs_image_tools, registry
from tests.integration.images.test_image_machines import fetch, worker_args
from tests.poll_kit import until
from tests.tls_kit import TEST_CA

pytestmark = [needs_image_tools,
              pytest.mark.skipif(shutil.which("runsc") is None, reason="needs runsc")]


async def sandbox_machine(client: WorkerClient, image: str, **config: object) -> Machine:
    machine = await client.create_machine({"app": "img", "config": {
        "image": image, "guest": {"cpus": 1, "memory_mb": 256, "isolation": "sandbox"},
        **config}})
    return machine


async def run(client: WorkerClient, machine: Machine, *command: str) -> dict[str, object]:
    done: dict[str, object] = await client.call("POST", machine.id, "exec",
                                                json={"command": list(command)})
    return done


@contextlib.contextmanager
def host_listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's loopback, as a host service would have."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


async def test_a_sandbox_machine_serves_from_its_own_kernel_and_sees_nothing_of_the_host(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/sandboxed:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            capacity = await client.capacity()
            assert capacity.totals.isolations[:2] == ["container", "sandbox"]
            machine = await sandbox_machine(client, image, env={"FROM_CONFIG": "1"})
            await client.wait(machine.id, "started", timeout=60)
            machine = await client.machine(machine.id)
            assert machine.config is not None
            assert machine.config.guest is not None
            assert machine.config.guest.isolation == "sandbox"
            page = await fetch(f"http://{machine.private_ip}:8080/index.html")
            assert page == "hello from an image\n"

            done = await run(client, machine, "/bin/sh", "-c",
                             "echo $FROM_IMAGE $FROM_CONFIG; cat /proc/version")
            assert done["exit_code"] == 0, done
            lines = str(done["stdout"]).splitlines()
            assert lines[0] == "yes 1"
            assert lines[1].startswith("Linux version")
            assert lines[1] != Path("/proc/version").read_text().strip(), "gVisor's kernel"
            # Its processes are its own: its program as 1, and nothing of the host's.
            listed = await run(client, machine, "/bin/ls", "/proc")
            pids = {int(p) for p in str(listed["stdout"]).split() if p.isdigit()}
            assert 1 in pids
            assert len(pids) < 10, pids
            with host_listener() as listener:
                # The host's listener on loopback is not on the sandbox's loopback.
                port = listener.getsockname()[1]
                tried = await run(client, machine, "/bin/sh", "-c",
                                  f"busybox nc 127.0.0.1 {port} </dev/null & sleep 1; "
                                  "kill $! 2>/dev/null; true")
                assert tried["exit_code"] == 0, tried
                listener.settimeout(0.5)
                with pytest.raises(TimeoutError):
                    listener.accept()
            failed = await run(client, machine, "/bin/sh", "-c", "exit 7")
            assert failed["exit_code"] == 7

            await client.stop(machine.id, signal="SIGTERM", timeout="5s")
            stopped = await client.wait(machine.id, "stopped", timeout=30)
            assert stopped.state == "stopped"
            await client.start(machine.id)
            await client.wait(machine.id, "started", timeout=60)
            assert await fetch(f"http://{machine.private_ip}:8080/") == "hello from an image\n"
            await client.destroy(machine.id, force=True)
            await client.wait(machine.id, "destroyed", timeout=30)


def sandbox_pids(machine_id: str) -> list[int]:
    """The host's runsc processes of the machine's sandbox (its sandbox, gofer and run)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if argv[0].startswith(b"runsc") and any(
                        a.startswith(machine_id.encode()) for a in argv):
                    found.append(int(proc.name))
    return sorted(found)


async def exits(client: WorkerClient, machine_id: str) -> list[dict[str, object]]:
    events = await client.call("GET", machine_id, "events")
    return [e["request"]["exit_event"] for e in events if e["type"] == "exit"]


async def test_a_sandbox_keeps_its_exit_codes_restarts_and_outlives_its_worker(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/sandboxed:v2")
        args = worker_args(host)
        daemon = worker_daemon(tmp_path, **args)
        await daemon.start()
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                # An exit code is the program's; on-failure restarts it once, then it stops.
                failing = await sandbox_machine(
                    client, image, init={"exec": ["/bin/sh", "-c", "sleep 0.5; exit 3"]},
                    restart={"policy": "on-failure", "max_retries": 1})
                await until(lambda: exits(client, failing.id), timeout=60)
                await client.wait(failing.id, "stopped", timeout=60)
                codes = [e["exit_code"] for e in await exits(client, failing.id)]
                assert codes == [3, 3], codes

                serving = await sandbox_machine(client, image)
                await client.wait(serving.id, "started", timeout=60)
                serving = await client.machine(serving.id)
                await fetch(f"http://{serving.private_ip}:8080/")
                running = sandbox_pids(serving.id)
                assert running, "runsc runs the machine's sandbox"

                # Suspended: runsc pauses the sandbox; it answers nothing until resumed.
                await client.suspend(serving.id)
                await client.wait(serving.id, "suspended", timeout=30)
                with pytest.raises(httpx.TimeoutException):
                    async with httpx.AsyncClient() as http:
                        await http.get(f"http://{serving.private_ip}:8080/", timeout=1.0)
                await client.start(serving.id)
                await client.wait(serving.id, "started", timeout=30)
                assert await fetch(f"http://{serving.private_ip}:8080/") == \
                    "hello from an image\n"

            await daemon.kill9()
            assert sandbox_pids(serving.id) == running, "the worker's death spares the sandbox"
            await daemon.start()
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                again = await client.machine(serving.id)
                assert again.state == "started"
                assert sandbox_pids(serving.id) == running, "re-adopted, not started again"
                done = await run(client, again, "/bin/cat", "/www/index.html")
                assert done["stdout"] == "hello from an image\n"
                # A stop's SIGTERM reaches the program through runsc: httpd ends on it.
                await client.stop(serving.id, signal="SIGTERM", timeout="10s")
                await client.wait(serving.id, "stopped", timeout=30)
                last = (await exits(client, serving.id))[0]
                assert last["exit_code"] == 143, last
                assert last["requested_stop"] is True
                await until(lambda: sandbox_pids(serving.id) == [], what="the sandbox gone")
                for machine_id in (failing.id, serving.id):
                    await client.destroy(machine_id, force=True)
                    await client.wait(machine_id, "destroyed", timeout=30)
        finally:
            await daemon.stop()
