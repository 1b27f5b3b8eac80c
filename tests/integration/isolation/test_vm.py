"""vm machines on a real worker: qemu microvm, Debian's cloud kernel, bodega's init, a real
registry, the machine's network namespace. Each boot under emulation costs a couple of
seconds of a shared CPU, so each test boots few VMs and asks many things of each."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bodega.model.errors import BodegaError
from bodega.model.machine import Machine
from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.integration.daemon_kit import worker_daemon
from tests.integration.images.image_kit import build_image, needs_image_tools, registry
from tests.integration.images.test_image_machines import fetch, worker_args
from tests.poll_kit import until
from tests.tls_kit import TEST_CA

pytestmark = [
    needs_image_tools, pytest.mark.slow,
    pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu"),
    pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                       reason="needs the vm kernel (scripts/host-packages)"),
]


async def vm_machine(client: WorkerClient, image: str, **config: object) -> Machine:
    return await client.create_machine({"app": "img", "config": {
        "image": image, "guest": {"cpus": 1, "memory_mb": 256, "isolation": "vm"}, **config}})


@contextlib.contextmanager
def host_listener() -> Iterator[socket.socket]:
    """A TCP listener on the host's loopback, as a host service would have."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


def console(data_dir: Path, machine_id: str) -> str:
    """The machine's log: its VM's console."""
    return "".join(path.read_text(errors="replace")
                   for path in sorted((data_dir / "machines" / machine_id / "logs").glob("*")))


def qemu_pids(machine_id: str) -> list[int]:
    """The host's qemu processes of the machine's VM."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if argv[0].endswith(b"qemu-system-x86_64") and any(
                        machine_id.encode() in a for a in argv):
                    found.append(int(proc.name))
    return sorted(found)


async def exits(client: WorkerClient, machine_id: str) -> list[dict[str, object]]:
    events = await client.call("GET", machine_id, "events")
    return [e["request"]["exit_event"] for e in events if e["type"] == "exit"]


async def exec_in(client: WorkerClient, machine_id: str, *command: str,
                  **body: object) -> dict[str, Any]:
    done: dict[str, Any] = await client.call("POST", machine_id, "exec",
                                             json={"command": list(command), **body})
    return done


async def exec_runs_as_its_program_in_the_guest(client: WorkerClient, machine_id: str) -> None:
    """What an exec into the VM sees and answers, as a container's would."""
    version = await exec_in(client, machine_id, "cat", "/proc/version")
    assert version["exit_code"] == 0, version
    assert version["stdout"].startswith("Linux version"), version
    assert version["stdout"] != Path("/proc/version").read_text(), "the guest's own kernel"

    # The image's root (not the initramfs's), its user and directory, the machine's env.
    where = await exec_in(client, machine_id, "/bin/sh", "-c",
                          "id -u; id -g; pwd; echo $FROM_IMAGE $FROM_CONFIG; "
                          "cat /www/index.html; [ -e /modules ] && echo initramfs || echo image")
    assert where["stdout"].splitlines() == ["1000", "1000", "/www", "yes 1",
                                            "hello from an image", "image"], where

    failed = await exec_in(client, machine_id, "/bin/sh", "-c", "echo out; echo err >&2; exit 3")
    assert (failed["exit_code"], failed["stdout"], failed["stderr"]) == (3, "out\n", "err\n")
    assert failed.get("exit_signal") is None

    # Quotes, newlines and control bytes in the argv and stdin come back as given.
    odd = ["a b", "it's", "x\ny", "$(id)", "\t\x01\x7f é ✓"]
    echoed = await exec_in(client, machine_id, "/bin/busybox", "printf", "%s|", *odd)
    assert echoed["stdout"] == "|".join(odd) + "|", echoed
    fed = "line1\nline2\r\n\x02\x03 é\n\n"
    assert (await exec_in(client, machine_id, "cat", stdin=fed))["stdout"] == fed
    with pytest.raises(BodegaError, match="takes 65536 bytes of stdin at most"):
        await exec_in(client, machine_id, "cat", stdin="x" * 65537)

    # Past its timeout the command and its children are killed, answered as a container's.
    late = await exec_in(client, machine_id, "/bin/sh", "-c",
                         "echo before; sleep 77 & sleep 78; echo after", timeout=1)
    assert (late["exit_code"], late["exit_signal"]) == (124, 9), late
    assert late["stdout"] == "before\n"
    assert late["stderr"].endswith("exec: timed out\n")
    # The next exec has its own answer, and sees none of the last one's processes left.
    procs = await exec_in(client, machine_id, "/bin/sh", "-c",
                          "cat /proc/[0-9]*/cmdline; echo; echo second")
    assert procs["stdout"].endswith("\nsecond\n"), procs
    assert "sleep\x0077" not in procs["stdout"]
    assert "sleep\x0078" not in procs["stdout"]


async def test_a_vm_runs_its_own_kernel_keeps_exit_codes_and_restarts(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/vm:v1")
        daemon = await worker_daemon(tmp_path, **worker_args(host)).start()
        data_dir = tmp_path / "w1"
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                capacity = await client.capacity()
                assert "vm" in capacity.totals.isolations
                assert capacity.totals.vm_accel in ("kvm", "tcg")
                with host_listener() as listener:
                    port = listener.getsockname()[1]
                    # The test's own pid, far above a fresh kernel's few: not the VM's to see.
                    script = ("cat /proc/version; "
                              f"[ -e /proc/{os.getpid()} ] && echo sees-host || echo own-pids; "
                              "echo env $FROM_IMAGE $FROM_CONFIG $(id -u) $(hostname); "
                              f"busybox nc -w 1 127.0.0.1 {port} </dev/null "
                              "&& echo reached || echo unreached; exit 7")
                    failing = await vm_machine(
                        client, image, env={"FROM_CONFIG": "1"},
                        init={"exec": ["/bin/sh", "-c", script]},
                        restart={"policy": "on-failure", "max_retries": 1})

                    async def two_exits() -> bool:
                        return len(await exits(client, failing.id)) == 2

                    await until(two_exits, timeout=120, every=0.5, what="two exits")
                    await client.wait(failing.id, "stopped", timeout=60)
                    listener.settimeout(0.1)
                    with pytest.raises(TimeoutError):
                        listener.accept()
                codes = [e["exit_code"] for e in await exits(client, failing.id)]
                assert codes == [7, 7], codes
                log = console(data_dir, failing.id)
                versions = [line.strip() for line in log.splitlines()
                            if line.startswith("Linux version")]
                assert len(versions) == 2, log
                assert versions[0] != Path("/proc/version").read_text().strip(), "its own"
                assert log.count("own-pids") == 2, log
                assert "sees-host" not in log
                assert f"env yes 1 0 {failing.id}" in log
                assert "unreached" in log
                assert "\nreached" not in log
                assert qemu_pids(failing.id) == []
                await client.destroy(failing.id, force=True)
        finally:
            await daemon.stop()


# The program: httpd serving a copy of the image's page from the guest's tmpfs, and beside
# it a shell loop whose count lives only in its memory, writing it there with the boot's
# id. A resume from the snapshot goes on with both; a cold boot starts the count again
# under a new id, and nothing of the tmpfs is left from before it.
STATEFUL = ("busybox mkdir -p /dev/shm/www; cat /www/index.html > /dev/shm/www/index.html; "
            "boot=$(cat /proc/sys/kernel/random/boot_id); i=0; "
            "while :; do i=$((i+1)); echo \"$i $boot\" > /dev/shm/www/state.tmp; "
            "busybox mv /dev/shm/www/state.tmp /dev/shm/www/state; sleep 1; done & "
            "exec httpd -f -p 8080 -h /dev/shm/www")


async def guest_state(machine: Machine) -> tuple[int, str]:
    """The loop's count and the boot's id, as httpd serves them."""
    async def served() -> bool:
        return len((await fetch(f"http://{machine.private_ip}:8080/state", 60)).split()) == 2

    await until(served, timeout=60, every=0.2, what="the guest's state served")
    count, boot = (await fetch(f"http://{machine.private_ip}:8080/state")).split()
    return int(count), boot


async def test_a_vm_serves_suspends_to_its_snapshot_and_outlives_its_worker(
        tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/vm:v2", user="1000:1000")
        daemon = await worker_daemon(tmp_path, **worker_args(host)).start()
        data_dir = tmp_path / "w1"
        try:
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                serving = await vm_machine(client, image, env={"FROM_CONFIG": "1"},
                                           init={"exec": ["/bin/sh", "-c", STATEFUL]})
                await client.wait(serving.id, "started", timeout=60)
                serving = await client.machine(serving.id)
                assert serving.config is not None
                assert serving.config.guest is not None
                assert serving.config.guest.isolation == "vm"
                page = await fetch(f"http://{serving.private_ip}:8080/index.html", 60)
                assert page == "hello from an image\n"
                booted = qemu_pids(serving.id)
                assert len(booted) == 1
                # qemu, the guest's memory with it, is in the machine's cgroups and limits.
                assert f"/{serving.id}\n" in Path(f"/proc/{booted[0]}/cgroup").read_text()
                await exec_runs_as_its_program_in_the_guest(client, serving.id)
                held = (await client.capacity()).used.memory_mb
                count, boot = await guest_state(serving)

                # Suspended: the VM's state is in its snapshot and its qemu is gone; the
                # machine holds its room as any suspended machine does.
                vm_dir = data_dir / "machines" / serving.id / "vm"
                await client.suspend(serving.id)
                await client.wait(serving.id, "suspended", timeout=60)
                assert qemu_pids(serving.id) == []
                assert (vm_dir / "snapshot").stat().st_size > 0
                assert not (vm_dir / "snapshot.partial").exists()
                assert (await client.capacity()).used.memory_mb == held
                with pytest.raises(httpx.HTTPError):
                    async with httpx.AsyncClient() as http:
                        await http.get(f"http://{serving.private_ip}:8080/", timeout=1.0)

                # A start resumes it from the file: the same boot, its loop's count going on.
                await client.start(serving.id)
                await client.wait(serving.id, "started", timeout=60)
                assert await fetch(f"http://{serving.private_ip}:8080/") == \
                    "hello from an image\n"
                resumed_count, resumed_boot = await guest_state(serving)
                assert resumed_boot == boot, "resumed, not booted again"
                assert resumed_count >= count
                assert not (vm_dir / "snapshot").exists()
                assert len(qemu_pids(serving.id)) == 1
                assert qemu_pids(serving.id) != booted

                # Suspended again, then the worker is killed: its next process resumes it.
                await client.suspend(serving.id)
                await client.wait(serving.id, "suspended", timeout=60)

            await daemon.kill9()
            assert qemu_pids(serving.id) == []
            # Its boot's initramfs has gone meanwhile, as a newer init's replaces it on the
            # host: the resume starts qemu with the worker's own, the guest keeps its own.
            launch = json.loads((vm_dir / "launch.json").read_text())
            launch["initramfs"] = str(tmp_path / "gone.cpio")
            (vm_dir / "launch.json").write_text(json.dumps(launch))
            await daemon.start()
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                assert (await client.machine(serving.id)).state == "suspended"
                await client.start(serving.id)
                await client.wait(serving.id, "started", timeout=60)
                assert (await guest_state(serving))[1] == boot
                assert "could not resume" not in console(data_dir, serving.id)
                running = qemu_pids(serving.id)
                assert len(running) == 1

            await daemon.kill9()
            assert qemu_pids(serving.id) == running, "the worker's death spares the VM"
            await daemon.start()
            async with WorkerClient(daemon.url, TEST_CA.context("broker")) as client:
                again = await client.machine(serving.id)
                assert again.state == "started"
                assert qemu_pids(serving.id) == running, "re-adopted, not booted again"
                # A stop's SIGTERM reaches the program through the init's signal line, a new
                # socket since the resume: httpd ends on it.
                await client.stop(serving.id, signal="SIGTERM", timeout="20s")
                await client.wait(serving.id, "stopped", timeout=60)
                with pytest.raises(BodegaError, match="is stopped, not started"):
                    await exec_in(client, serving.id, "/bin/true")
                last = (await exits(client, serving.id))[0]
                assert last["exit_code"] == 143, last
                assert last["requested_stop"] is True
                await until(lambda: qemu_pids(serving.id) == [], what="the VM gone")

                # A torn snapshot: the start boots the machine afresh, and its log says why.
                await client.start(serving.id)
                await client.wait(serving.id, "started", timeout=60)
                _, cold_boot = await guest_state(serving)
                assert cold_boot != boot
                await client.suspend(serving.id)
                await client.wait(serving.id, "suspended", timeout=60)
                snapshot = vm_dir / "snapshot"
                snapshot.write_bytes(snapshot.read_bytes()[:snapshot.stat().st_size // 2])
                await client.start(serving.id)
                await client.wait(serving.id, "started", timeout=60)
                _, reboot = await guest_state(serving)
                assert reboot not in (boot, cold_boot), "booted cold"
                assert "the VM could not resume (its snapshot did not load" in \
                    console(data_dir, serving.id)
                assert not snapshot.exists()

                # A stop of a suspended vm resumes it first, as it thaws a container: its
                # program hears the signal and its code is the stop's.
                await client.suspend(serving.id)
                await client.wait(serving.id, "suspended", timeout=60)
                await client.stop(serving.id, signal="SIGTERM", timeout="20s")
                await client.wait(serving.id, "stopped", timeout=60)
                last = (await exits(client, serving.id))[0]
                assert last["exit_code"] == 143, last
                await until(lambda: qemu_pids(serving.id) == [], what="the VM gone")
                await client.destroy(serving.id, force=True)
                await client.wait(serving.id, "destroyed", timeout=30)
        finally:
            await daemon.stop()
