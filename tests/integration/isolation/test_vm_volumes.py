"""A vm machine's volume on a real worker: a directory of the host, shared with the VM by
virtiofs (Debian's virtiofsd beside qemu), mounted by bodega's init where the config says."""

from __future__ import annotations

from pathlib import Path

from bodega.wire.internal.worker_client import WorkerClient
from tests.integration.daemon_kit import worker_daemon
from tests.integration.images.image_kit import build_image, registry
from tests.integration.images.test_image_machines import worker_args
from tests.integration.isolation.test_vm import console, exits, pytestmark, qemu_pids, vm_machine
from tests.poll_kit import until
from tests.tls_kit import TEST_CA

__all__ = ["pytestmark"]


async def test_a_vm_reads_and_writes_its_volume_on_the_host(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/vm:volume")
        daemon = await worker_daemon(tmp_path, **worker_args(host)).start()
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                volume = await client.create_volume({"app": "img", "name": "data", "size_gb": 1})
                shared = tmp_path / "w1" / "volumes" / volume.id
                (shared / "from-host").write_text("written on the host\n")
                script = ("cat /data/from-host; echo written in the vm > /data/from-vm; "
                          "grep ' /data ' /proc/mounts; exit 3")
                machine = await vm_machine(client, image,
                                           init={"exec": ["/bin/sh", "-c", script]},
                                           mounts=[{"volume": volume.id, "path": "/data"}])

                async def exited() -> bool:
                    return len(await exits(client, machine.id)) == 1

                await until(exited, timeout=120, every=0.5, what="the program's exit")
                assert [e["exit_code"] for e in await exits(client, machine.id)] == [3]
                assert (shared / "from-vm").read_text() == "written in the vm\n"
                log = console(tmp_path / "w1", machine.id)
                assert "written on the host" in log, log
                assert "vol0 /data virtiofs" in log, log
                await until(lambda: qemu_pids(machine.id) == [], what="the VM gone")
                await client.destroy(machine.id, force=True)
        finally:
            await daemon.stop()
