"""A worker readies the kernel's cgroup lock as an image machine's create or start arrives
(``drivers/process/warmup.py``); a process machine's, which takes a parked launcher, does not."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from bodega.model.errors import BodegaError
from tests.tls_kit import TEST_CA

from ..cgroup_kit import warmable
from ..daemon_kit import Daemon, running_worker_daemon
from .image_kit import build_image, needs_image_tools, registry
from .test_image_machines import fetch, image_machine, worker_args

pytestmark = [needs_image_tools, pytest.mark.skipif(
    not warmable(), reason="needs its own cgroup in a v1 memory hierarchy")]


async def moves(daemon: Daemon) -> float:
    """The worker's warm-up moves so far, once its last burst is over (50 ms hold)."""
    async with TEST_CA.http("admin") as http:
        last = -1.0
        while True:
            text = (await http.get(daemon.url + "/metrics")).text
            found = re.search(r"^bodega_worker_cgroup_warmup_moves_total ([0-9.e+]+)$",
                              text, re.M)
            assert found is not None, "the worker's metrics count no warm-up moves"
            if float(found.group(1)) == last:
                return last
            last = float(found.group(1))
            await asyncio.sleep(0.2)


async def test_an_image_machine_s_create_and_start_warm_the_cgroup_lock(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/warm:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (daemon, client):
            process = await client.create_machine({"app": "img", "config": {
                "image": "process", "init": {"exec": ["sleep", "60"]},
                "guest": {"cpus": 1, "memory_mb": 128}}})
            await client.wait(process.id, "started", timeout=30)
            assert await moves(daemon) == 0

            machine = await image_machine(client, image)
            await fetch(f"http://{machine.private_ip}:8080/")
            created = await moves(daemon)
            assert created >= 1

            await client.stop(machine.id, signal="SIGTERM", timeout="5s")
            await client.wait(machine.id, "stopped", timeout=30)
            await client.start(machine.id)
            await client.wait(machine.id, "started", timeout=30)
            await fetch(f"http://{machine.private_ip}:8080/")
            started = await moves(daemon)
            assert started > created

            # Created without a launch: nothing to warm for until it is started.
            later = await client.create_machine({"app": "img", "skip_launch": True, "config": {
                "image": image, "guest": {"cpus": 1, "memory_mb": 256}}})
            assert await moves(daemon) == started
            await client.start(later.id)
            await client.wait(later.id, "started", timeout=30)
            assert await moves(daemon) > started
            for mid in (machine.id, process.id, later.id):
                await client.destroy(mid, force=True)


def cgroups_of(machine_id: str) -> list[Path]:
    """The machine's cgroups in every v1 hierarchy (any worker scope)."""
    return sorted(Path("/sys/fs/cgroup").glob(f"*/bodega/*/{machine_id}"))


async def test_a_refused_image_create_leaves_no_cgroup_made_ahead(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/ahead:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (daemon, client):
            with pytest.raises(BodegaError, match="memory"):  # a process machine's: no burst
                await client.create_machine({"app": "img", "config": {
                    "image": "process", "init": {"exec": ["sleep", "60"]},
                    "guest": {"cpus": 1, "memory_mb": 8192}}})
            assert await moves(daemon) == 0
            machine = await image_machine(client, image)
            await fetch(f"http://{machine.private_ip}:8080/")  # the runtime made the rest
            made = cgroups_of(machine.id)
            assert made, "an image machine's create made no cgroup"
            refused = "0123456789abcd"
            with pytest.raises(BodegaError, match="memory"):  # more than the worker has
                await client.create_machine({"app": "img", "machine_id": refused, "config": {
                    "image": image, "guest": {"cpus": 1, "memory_mb": 8192}}})
            await moves(daemon)  # its warm-up burst is over: what it readied is undone
            assert cgroups_of(refused) == []
            assert set(made) <= set(cgroups_of(machine.id))  # another machine's are left
            await client.destroy(machine.id, force=True)
