"""Signals into a vm machine as it boots, on a real worker: qemu serves the VM's signal line
from its start, while the guest's kernel boots and its init has not opened the port yet.
What the worker writes then is offered again until the init takes it
(``drivers/vm/signal_line.py``), so it reaches the program once it runs."""

from __future__ import annotations

from pathlib import Path

from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.drivers.vm.core.qemu import control_socket
from tests.integration.daemon_kit import worker_daemon
from tests.integration.images.image_kit import build_image, registry
from tests.integration.images.test_image_machines import worker_args
from tests.integration.isolation.test_vm import console, exits, pytestmark, qemu_pids, vm_machine
from tests.poll_kit import until
from tests.tls_kit import TEST_CA

__all__ = ["pytestmark"]

PROGRAM = ["/bin/sh", "-c", "echo listening; exec sleep 1000"]


async def test_a_signal_or_a_stop_sent_as_the_vm_boots_reaches_its_program(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/vm:signals")
        daemon = await worker_daemon(tmp_path, **worker_args(host)).start()
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                signalled = await vm_machine(client, image, init={"exec": PROGRAM},
                                             restart={"policy": "no"})
                stopped = await vm_machine(client, image, init={"exec": PROGRAM})
                for machine in (signalled, stopped):
                    # qemu serves the line from its start: the guest is booting then.
                    await until(control_socket(machine.id).exists, timeout=60, every=0.01,
                                what="qemu serving the signal line")
                    if machine is signalled:
                        await client.call("POST", machine.id, "signal",
                                          json={"signal": "SIGUSR1"})
                    else:
                        await client.stop(machine.id, signal="SIGTERM", timeout="30s")
                    await client.wait(machine.id, "stopped", timeout=60)

                # The program had no trap for it yet: the signal ended it, as a container's.
                ended = (await exits(client, signalled.id))[0]
                assert (ended["exit_code"], ended.get("signal")) == (138, 10), ended
                assert ended["requested_stop"] is False
                # The stop's signal ended the program: not its timeout's kill.
                ended = (await exits(client, stopped.id))[0]
                assert (ended["exit_code"], ended.get("signal")) == (143, 15), ended
                assert ended["requested_stop"] is True
                for machine in (signalled, stopped):
                    assert "bodega-init: exit code" in console(tmp_path / "w1", machine.id)
                    await until(lambda m=machine: qemu_pids(m.id) == [], what="the VM gone")
                    await client.destroy(machine.id, force=True)
        finally:
            await daemon.stop()
