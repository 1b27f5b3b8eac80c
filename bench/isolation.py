"""Isolation's cost: start to first HTTP answer and idle memory, container, sandbox and vm.

On one worker daemon (the oci driver, runc or crun for containers, runsc for
sandboxes, qemu microvm for vms) with a real registry and a small busybox httpd
image: each run creates a machine through the worker's API and times until its
private address answers HTTP; once all are up, each machine's memory cgroup says
what it holds idle (the sandbox's counts gVisor's kernel, its gofer and the
program's pages; the vm's, qemu with the guest's memory it touched). For the vm,
beside it: a bare qemu boot of the same kernel and bodega's initramfs to its power
off (the probe boot, no disks, no network), and a resume (suspend: QMP stop and a
snapshot; start: QMP cont) to the first HTTP answer.

    python -m bench.isolation [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from tests.integration.daemon_kit import running_worker_daemon
from tests.integration.images.image_kit import build_image, registry
from tests.integration.images.test_image_machines import worker_args

from bodega.wire.worker_client import WorkerClient
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR, Kernel
from bodega.worker.drivers.vm.qemu import tsc_khz
from bodega.worker.host.vm_probe import INITRAMFS_DIR, boot


async def first_answer(url: str, began: float) -> float:
    async with httpx.AsyncClient() as client:
        while True:
            try:
                await client.get(url, timeout=1.0)
                return time.perf_counter() - began
            except httpx.HTTPError:
                await asyncio.sleep(0.005)


def idle_bytes(machine_id: str) -> int:
    for usage in Path("/sys/fs/cgroup/memory/bodega").glob(
            f"*/{machine_id}/memory.usage_in_bytes"):
        return int(usage.read_text())
    return 0


async def side(client: WorkerClient, image: str, isolation: str,
               runs: int) -> tuple[list[float], list[int]]:
    starts, ids = [], []
    for _ in range(runs):
        began = time.perf_counter()
        machine = await client.create_machine({"app": "bench", "config": {
            "image": image, "guest": {"cpus": 1, "memory_mb": 128, "isolation": isolation}}})
        machine = await client.machine(machine.id)
        starts.append(await first_answer(f"http://{machine.private_ip}:8080/", began))
        ids.append(machine.id)
    await asyncio.sleep(2.0)  # idle: what each holds once started and quiet
    memory = [idle_bytes(mid) for mid in ids]
    if isolation == "vm":
        await resumes(client, ids[0])
    for mid in ids:
        await client.destroy(mid, force=True)
        await client.wait(mid, "destroyed", timeout=60)
    return starts, memory


async def resumes(client: WorkerClient, machine_id: str, runs: int = 3) -> None:
    machine = await client.machine(machine_id)
    times = []
    for _ in range(runs):
        await client.suspend(machine_id)
        await client.wait(machine_id, "suspended", timeout=60)
        began = time.perf_counter()
        await client.start(machine_id)
        times.append(await first_answer(f"http://{machine.private_ip}:8080/", began))
    print(f"vm        resume (QMP cont) to first HTTP answer: median "
          f"{statistics.median(times) * 1000:.0f} ms")


def bare_boots(runs: int) -> None:
    kernel = Kernel.find(DEFAULT_KERNEL_DIR)
    [initrd] = sorted(INITRAMFS_DIR.glob(f"initramfs-{kernel.version}-*.cpio"))[-1:]
    khz = tsc_khz(Path("/proc/cpuinfo").read_text())
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        assert boot(kernel, initrd, "tcg", khz).ran
        times.append(time.perf_counter() - began)
    print(f"bare qemu boot (tcg) to power off: median {statistics.median(times) * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f})")


async def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        async with registry(work) as host:
            image = build_image(work, host, "bench/isolation:v1")
            async with running_worker_daemon(work, **worker_args(host)) as (_daemon, client):
                warm = await client.create_machine({"app": "bench", "config": {"image": image}})
                await client.wait(warm.id, "started", timeout=60)  # the image pulled once
                await client.destroy(warm.id, force=True)
                for isolation in ("container", "sandbox", "vm"):
                    starts, memory = await side(client, image, isolation, runs)
                    print(f"{isolation:9} start to first HTTP answer: median "
                          f"{statistics.median(starts) * 1000:.0f} ms "
                          f"(min {min(starts) * 1000:.0f}, max {max(starts) * 1000:.0f}); "
                          f"idle memory: median {statistics.median(memory) / 2**20:.1f} MB")
        bare_boots(runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    asyncio.run(main(parser.parse_args().runs))
