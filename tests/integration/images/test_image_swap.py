"""An image machine's swap (``init.swap_size_mb``) as its memory cgroup bounds it, on a real
worker: a container's (runc or crun) and, where runsc is installed, a sandbox's. The cgroup
is bodega's (``bodega/<scope>/<machine>``, which the runtime joins); on a host that does not
account swap (no ``memory.memsw.*``) the documented fallback holds instead: the memory limit
alone, and the worker says so at its start."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import pytest

from bodega.model.machine import Machine
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.drivers.process.cgroups import Cgroups
from tests.poll_kit import until

from ..daemon_kit import running_worker_daemon
from .image_kit import build_image, needs_image_tools, registry
from .test_image_machines import fetch, worker_args

pytestmark = needs_image_tools
MIB = 1024 * 1024
MEMORY = Path("/sys/fs/cgroup/memory")


async def started(client: WorkerClient, image: str, isolation: str,
                  swap_mb: int | None) -> Machine:
    init = {} if swap_mb is None else {"init": {"swap_size_mb": swap_mb}}
    machine = await client.create_machine({"app": "img", "config": {
        "image": image, "guest": {"cpus": 1, "memory_mb": 256, "isolation": isolation},
        **init}})
    await client.wait(machine.id, "started", timeout=60)
    machine = await client.machine(machine.id)
    await fetch(f"http://{machine.private_ip}:8080/")  # its program is up, in its cgroup
    return machine


def limits_mb(machine_id: str) -> tuple[int, int | None]:
    """The machine's memory cgroup's (memory, memory + swap) limits in MB; None for the
    second where the host does not account swap."""
    (cgroup,) = MEMORY.glob(f"bodega/*/{machine_id}")
    memory = int((cgroup / "memory.limit_in_bytes").read_text()) // MIB
    memsw = cgroup / "memory.memsw.limit_in_bytes"
    return memory, int(memsw.read_text()) // MIB if memsw.exists() else None


async def holds(machine_id: str, wanted: tuple[int, int | None], what: str) -> None:
    """The machine's limits read as ``wanted``, read again for up to 5 s first: one full run
    read memory + swap as unlimited at the instant a restart was answered (its memory limit
    already written). What the run keeps is asserted."""
    with contextlib.suppress(AssertionError):
        await until(lambda: limits_mb(machine_id) == wanted, timeout=5, what=what)
    assert limits_mb(machine_id) == wanted, what


# crun, told no limits in the bundle, wrote v1's memory + swap as unlimited over the
# worker's: each runtime is run.
@pytest.mark.parametrize("runtime", ["crun", "runc"])
async def test_a_container_swaps_what_its_config_asks_beside_its_memory_and_no_more(
        tmp_path: Path, runtime: str) -> None:
    accounted = Cgroups(1, "probe").accounts_swap()
    expect = (lambda total: total) if accounted else (lambda _total: None)
    isolations = ["container", *(["sandbox"] if shutil.which("runsc") else [])]
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/swap:v1")
        async with running_worker_daemon(
                tmp_path, **worker_args(host, "--oci-runtime", runtime)) as (daemon, client):
            assert (await client.capacity()).totals.isolations[:len(isolations)] == isolations
            warnings = json.loads(daemon.ready_file.read_text()).get("warnings", [])
            assert any("do not account swap" in line for line in warnings) != accounted
            for isolation in isolations:
                swapping = await started(client, image, isolation, 512)
                await holds(swapping.id, (256, expect(768)), isolation)
                plain = await started(client, image, isolation, None)
                await holds(plain.id, (256, expect(256)), isolation)  # no swap

                # A live memory change keeps the swap; so does a restart at the new limit.
                await client.call("PUT", swapping.id, "memory", json={"limit_mb": 160})
                await holds(swapping.id, (160, expect(672)), f"{isolation} changed live")
                await client.stop(swapping.id, signal="SIGTERM", timeout="5s")
                await client.wait(swapping.id, "stopped", timeout=30)
                await client.start(swapping.id)
                await client.wait(swapping.id, "started", timeout=30)
                await holds(swapping.id, (160, expect(672)), f"{isolation} restarted")
                for machine in (swapping, plain):
                    await client.destroy(machine.id, force=True)
                    await client.wait(machine.id, "destroyed", timeout=30)
