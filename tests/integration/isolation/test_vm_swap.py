"""A vm machine's swap on a real worker: a sparse disk of ``init.swap_size_mb`` beside the
machine's other disks, on which bodega's init swaps before the program runs; the guest's
own /proc/swaps shows it, the guest's memory is still the memory asked, and the disk
goes with the machine."""

from __future__ import annotations

import json
from pathlib import Path

from bodega.model.errors import BodegaError
from bodega.wire.internal.worker_client import WorkerClient
from tests.integration.daemon_kit import worker_daemon
from tests.integration.images.image_kit import build_image, registry
from tests.integration.images.test_image_machines import worker_args
from tests.integration.isolation.test_vm import console, exec_in, pytestmark, qemu_pids, vm_machine
from tests.poll_kit import until
from tests.tls_kit import TEST_CA

__all__ = ["pytestmark"]


def swaps(text: str) -> list[tuple[str, int]]:
    """/proc/swaps' rows: each device and its size in KiB."""
    return [(row.split()[0], int(row.split()[2])) for row in text.splitlines()[1:] if row]


async def answering(client: WorkerClient, machine_id: str) -> None:
    """Until an exec in the VM answers: its init has booted, swapped on and run the program."""
    async def answers() -> bool:
        try:
            return bool((await exec_in(client, machine_id, "true"))["exit_code"] == 0)
        except BodegaError:  # the guest still booting
            return False

    await until(answers, timeout=120, every=0.5, what="an exec in the VM")


async def test_a_vm_swaps_on_a_disk_of_the_size_its_config_asks(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/vm:swap")
        daemon = await worker_daemon(tmp_path, **worker_args(host)).start()
        machines = tmp_path / "w1" / "machines"
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                swapping = await vm_machine(client, image, init={"swap_size_mb": 64})
                plain = await vm_machine(client, image)
                for machine in (swapping, plain):
                    await client.wait(machine.id, "started", timeout=60)

                await answering(client, swapping.id)
                shown = await exec_in(client, swapping.id, "cat", "/proc/swaps")
                # One virtio disk, the whole of it less mkswap's header page.
                ((device, size),) = swaps(shown["stdout"])
                assert (device.startswith("/dev/vd"), size) == (True, 64 * 1024 - 4), shown
                memory = await exec_in(client, swapping.id, "grep", "-E",
                                       "^(MemTotal|SwapTotal):", "/proc/meminfo")
                total, swap_total = (int(line.split()[1])
                                     for line in memory["stdout"].splitlines())
                assert swap_total == 64 * 1024 - 4, memory
                disk = machines / swapping.id / "vm" / "swap.img"
                launch = json.loads((disk.parent / "launch.json").read_text())
                # Its guest memory is what qemu was given, swap or not: the 256 MB asked (the
                # ledger counts qemu's own 128 MB beside it, which its cgroup allows it).
                assert launch["memory_mb"] == 256, launch
                assert 128 * 1024 < total <= launch["memory_mb"] * 1024, (memory, launch)
                assert disk.stat().st_size == 64 << 20
                assert "no swap" not in console(tmp_path / "w1", swapping.id)

                await answering(client, plain.id)
                none = await exec_in(client, plain.id, "cat", "/proc/swaps")
                assert swaps(none["stdout"]) == [], none
                assert not (machines / plain.id / "vm" / "swap.img").exists()

                for machine in (swapping, plain):
                    await client.destroy(machine.id, force=True)
                    await client.wait(machine.id, "destroyed", timeout=60)
                    await until(lambda m=machine: qemu_pids(m.id) == [], what="the VM gone")
                assert not disk.exists()
        finally:
            await daemon.stop()
