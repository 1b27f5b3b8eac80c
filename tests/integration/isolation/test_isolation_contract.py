"""The same machine contract for every isolation, on a real worker: a container (crun or
runc), a sandbox (runsc) and a vm (qemu) each serve on their private address, take an exec,
stop with the program's exit code, start again, restart on failure as their policy says,
and keep their console as their log."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from bodega.wire.internal.worker_client import WorkerClient
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.integration.daemon_kit import running_worker_daemon
from tests.integration.images.image_kit import build_image, needs_image_tools, registry
from tests.integration.images.test_image_machines import fetch, worker_args
from tests.poll_kit import until

pytestmark = needs_image_tools

ISOLATIONS = [
    pytest.param("container", id="container"),
    pytest.param("sandbox", id="sandbox", marks=pytest.mark.skipif(
        shutil.which("runsc") is None, reason="needs runsc")),
    pytest.param("vm", id="vm", marks=[
        pytest.mark.slow,
        pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu"),
        pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                           reason="needs the vm kernel (scripts/host-packages)")]),
]


async def exits(client: WorkerClient, machine_id: str) -> list[int]:
    """The machine's exit codes, oldest first."""
    events = await client.call("GET", machine_id, "events")
    return [e["request"]["exit_event"]["exit_code"] for e in reversed(events)
            if e["type"] == "exit"]


def log_of(data_dir: Path, machine_id: str) -> str:
    return "".join(path.read_text(errors="replace")
                   for path in sorted((data_dir / "machines" / machine_id / "logs").glob("*")))


@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_every_isolation_keeps_the_machine_contract(tmp_path: Path,
                                                          isolation: str) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, f"test/contract-{isolation}:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            assert isolation in (await client.capacity()).totals.isolations

            def config(**more: Any) -> dict[str, Any]:
                return {"app": "img", "config": {
                    "image": image, "env": {"CONTRACT": "kept"},
                    "guest": {"cpus": 1, "memory_mb": 256, "isolation": isolation}, **more}}

            serving = await client.create_machine(config())
            failing = await client.create_machine(config(
                init={"exec": ["/bin/sh", "-c", "echo ran on $CONTRACT; exit 7"]},
                restart={"policy": "on-failure", "max_retries": 1}))

            # Serves on its private address, and an exec runs beside its program.
            await client.wait(serving.id, "started", timeout=60)
            serving = await client.machine(serving.id)
            assert serving.config is not None
            assert serving.config.guest is not None
            assert serving.config.guest.isolation == isolation
            url = f"http://{serving.private_ip}:8080/index.html"
            assert await fetch(url, 60) == "hello from an image\n"
            done: dict[str, Any] = await client.call(
                "POST", serving.id, "exec",
                json={"command": ["/bin/sh", "-c", "echo $CONTRACT; echo err >&2; exit 3"]})
            assert (done["exit_code"], done["stdout"], done["stderr"]) == (3, "kept\n", "err\n")

            # A stop's signal reaches the program, whose exit code is kept; a start again.
            await client.stop(serving.id, signal="SIGTERM", timeout="20s")
            await client.wait(serving.id, "stopped", timeout=60)
            assert await exits(client, serving.id) == [143]
            await client.start(serving.id)
            await client.wait(serving.id, "started", timeout=60)
            assert await fetch(url, 60) == "hello from an image\n"

            # A program that fails is restarted once, as its policy says, then stays stopped.
            async def two_exits() -> bool:
                return len(await exits(client, failing.id)) == 2

            await until(two_exits, timeout=120, every=0.5, what="two exits")
            await client.wait(failing.id, "stopped", timeout=60)
            assert await exits(client, failing.id) == [7, 7]
            assert log_of(tmp_path / "w1", failing.id).count("ran on kept") == 2

            for machine in (serving, failing):
                await client.destroy(machine.id, force=True)
                await client.wait(machine.id, "destroyed", timeout=60)


async def exit_events(client: WorkerClient, machine_id: str) -> list[dict[str, Any]]:
    """The machine's exit events, oldest first."""
    events = await client.call("GET", machine_id, "events")
    return [e["request"]["exit_event"] for e in reversed(events) if e["type"] == "exit"]


# A program that answers signals itself: SIGUSR1 is noted in its log, SIGINT (Fly's default
# stop signal) and SIGTERM end it with codes of its own, SIGHUP it ignores. It waits on a
# child, not in one, so a trap runs as soon as its signal comes, and it ends that child as it
# ends: a container's runtime waits for what its program leaves behind.
TRAPPING = ("trap '' HUP; trap 'echo got-usr1' USR1; sleep 1000 & child=$!; "
            "trap 'kill $child; exit 43' INT; trap 'kill $child; exit 42' TERM; "
            "echo listening; while kill -0 $child; do wait $child; done")


@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_a_stop_signal_reaches_the_program_in_every_isolation(tmp_path: Path,
                                                                    isolation: str) -> None:
    """The stop's signal (the API's, else the config's ``stop_config.signal``, else SIGINT)
    and a signal sent on its own reach the program, whose own exit is the machine's exit
    event; one that does not end the program in the stop's timeout is killed."""
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, f"test/signals-{isolation}:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            def config(program: str, **more: Any) -> dict[str, Any]:
                return {"app": "img", "config": {
                    "image": image, "init": {"exec": ["/bin/sh", "-c", program]},
                    "guest": {"cpus": 1, "memory_mb": 256, "isolation": isolation}, **more}}

            trapping = await client.create_machine(config(TRAPPING))
            # No trap: SIGTERM, the stop signal its config names, ends it by that signal.
            plain = await client.create_machine(config(
                "echo listening; exec sleep 1000", stop_config={"signal": "SIGTERM"}))

            async def listening(machine_id: str, runs: int) -> None:
                """The machine's ``runs``-th run has its program listening for signals."""
                def heard() -> bool:
                    return log_of(tmp_path / "w1", machine_id).count("listening") >= runs

                await client.wait(machine_id, "started", timeout=60)
                await until(heard, timeout=60, every=0.1, what=f"run {runs} listening")

            async def stopped(machine_id: str, **stop: str) -> dict[str, Any]:
                """Stop the machine; its last exit event."""
                await client.stop(machine_id, **stop)
                await client.wait(machine_id, "stopped", timeout=60)
                return (await exit_events(client, machine_id))[-1]

            # A signal of its own reaches the program, which goes on.
            await listening(trapping.id, 1)
            await client.call("POST", trapping.id, "signal", json={"signal": "SIGUSR1"})
            await until(lambda: "got-usr1" in log_of(tmp_path / "w1", trapping.id),
                        timeout=30, every=0.1, what="SIGUSR1 heard")
            assert (await client.machine(trapping.id)).state == "started"

            # The stop's default signal is SIGINT; the program's own code is the exit's.
            ended = await stopped(trapping.id, timeout="30s")
            assert (ended["exit_code"], ended.get("signal")) == (43, None), ended
            assert ended["requested_stop"] is True

            # The API's signal wins over the default.
            await client.start(trapping.id)
            await listening(trapping.id, 2)
            ended = await stopped(trapping.id, signal="SIGTERM", timeout="30s")
            assert (ended["exit_code"], ended.get("signal")) == (42, None), ended

            # A signal the program ignores: the stop's timeout ends in a kill.
            await client.start(trapping.id)
            await listening(trapping.id, 3)
            ended = await stopped(trapping.id, signal="SIGHUP", timeout="1s")
            assert (ended["exit_code"], ended.get("signal")) == (137, 9), ended

            await listening(plain.id, 1)
            ended = await stopped(plain.id, timeout="30s")
            assert (ended["exit_code"], ended.get("signal")) == (143, 15), ended

            for machine in (trapping, plain):
                await client.destroy(machine.id, force=True)
                await client.wait(machine.id, "destroyed", timeout=60)
