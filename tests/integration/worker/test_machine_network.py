"""Machines on one real worker: private addresses, the same port twice, addresses reused."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from bodega.model.machine import Machine
from bodega.wire.internal.worker_client import WorkerClient
from tests.python_kit import machine_python
from tests.tls_kit import TEST_CA

from .crash_kit import crash_worker, until

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="per-machine namespaces need root")

# Answers every connection with the machine's identity, as the worker's env gives it.
SERVER = (
    "import os, socket\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 8080)); s.listen()\n"
    "while True:\n"
    "    c, _ = s.accept()\n"
    "    keys = ('BODEGA_MACHINE_ID', 'BODEGA_APP_NAME', 'BODEGA_REGION', 'BODEGA_PRIVATE_IP')\n"
    "    c.sendall(' '.join(os.environ[k] for k in keys).encode()); c.close()\n"
)


def server_config() -> dict[str, Any]:
    return {"image": "local/echo", "init": {"exec": [machine_python(), "-c", SERVER]},
            "guest": {"cpus": 1, "memory_mb": 256},
            "services": [{"protocol": "tcp", "internal_port": 8080}]}


async def ask(host: str, port: int, timeout: float = 20.0) -> str:
    """Connect until the machine's service accepts, then read its one answer."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 2)
            data = await asyncio.wait_for(reader.read(200), 5)
            writer.close()
            return data.decode()
        except (OSError, TimeoutError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.05)


async def started(client: WorkerClient) -> Machine:
    machine = await client.create_machine({"app": "echo", "config": server_config()})
    await client.wait(machine.id, "started", timeout=30)
    return machine


async def test_two_machines_share_a_port_and_a_reused_address_answers(tmp_path: Path) -> None:
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        first, second = await started(client), await started(client)
        assert first.private_ip != second.private_ip
        for machine in (first, second):
            # The worker publishes where the service is reachable from other hosts.
            assert machine.service_host == machine.private_ip
            assert machine.service_host is not None
            answer = await ask(machine.service_host, 8080)
            assert answer == f"{machine.id} echo ams {machine.private_ip}"

        await client.destroy(first.id, force=True)
        await client.wait(first.id, "destroyed", timeout=30)
        # The freed address gets a fresh namespace, wired ahead of the next create, with a
        # launcher parked in it. A create prefers an address whose launcher is already in
        # its cgroups (``ready`` beside its FIFO), as the spares' are: wait until this one's
        # is too, or a loaded host hands the next create a spare instead.
        network = worker.network()
        index = int(first.private_ip.rsplit(".", 1)[1])
        launcher = worker.tmp / worker.name / "park" / network.netns(index) / "ready"
        await until(lambda: network.ready(index) and launcher.exists())
        third = await started(client)
        assert third.private_ip == first.private_ip, "the lowest ready address is reused"
        assert third.service_host is not None
        assert await ask(third.service_host, 8080) == (
            f"{third.id} echo ams {third.private_ip}")


def performed(metrics: str, fsm: str, step: str) -> float:
    """How many times the worker performed ``step``'s effect (folded steps are not timed)."""
    for line in metrics.splitlines():
        if line.startswith("bodega_worker_step_seconds_count{") and \
                f'fsm="{fsm}"' in line and f'step="{step}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_launch_does_not_attach_again_what_its_create_attached(tmp_path: Path) -> None:
    """The start a create launches skips its ``starting`` attach (the create's commit folds
    it: the namespace stands); a start after a stop attaches, and the machine answers."""
    async with crash_worker(tmp_path) as worker:
        client = await worker.start()
        assert worker.daemon is not None
        machine = await started(client)
        async with TEST_CA.http("admin") as http:
            metrics = (await http.get(worker.daemon.url + "/metrics")).text
            assert performed(metrics, "create_machine", "attach_network") == 1
            assert performed(metrics, "start_machine", "starting") == 0
            await client.stop(machine.id)
            await client.wait(machine.id, "stopped", timeout=30)
            await client.start(machine.id)
            await client.wait(machine.id, "started", timeout=30)
            metrics = (await http.get(worker.daemon.url + "/metrics")).text
            assert performed(metrics, "start_machine", "starting") == 1
        assert machine.service_host is not None
        assert await ask(machine.service_host, 8080) == (
            f"{machine.id} echo ams {machine.private_ip}")
