"""A running vm machine moves live on a real ``bodega up`` (two workers): ``bodega machine
move ID --to WORKER`` as a user types it carries the VM's memory, so its guest is not
rebooted (the same boot id), the counter its program keeps in a tmpfs goes on from where
it was, and a file written there by an exec is still there; the machine is on the other
worker, started, its events saying it moved live and how long its guest paused; one
qemu runs it. Its source worker killed with SIGKILL in the middle of the next move
(while the VM's state streams), the move still ends with exactly one running copy; its
target killed before the state came, the move falls back to booting the VM afresh there,
its event saying so, one copy again.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from bodega.worker.drivers.vm.core.qemu import CONTROL_DIR
from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.cluster.deploy_kit import Cli, readable_dir, until, up_cluster
from tests.cluster.vm_live_kit import polled, qemus, read, vm_app
from tests.integration.images.image_kit import needs_image_tools

pytestmark = [
    pytest.mark.slow, needs_image_tools,
    pytest.mark.skipif(os.geteuid() != 0, reason="machines in namespaces need root"),
    pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah"),
    pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu"),
    pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                       reason="needs the vm kernel (scripts/host-packages)"),
]
APP = "live-vm"


async def holder(cli: Cli, workers: list[str]) -> str | None:
    """The one worker whose published row counts the machine, once the rows agree."""
    async with httpx.AsyncClient(timeout=10) as api:
        rows = (await api.get(cli.env["BODEGA_API_URL"] + "/v1/cluster/workers", headers={
            "authorization": f"Bearer {cli.env['BODEGA_API_TOKEN']}"})).json()
    counts = {row["name"]: row.get("machines") for row in rows if row["name"] in workers}
    holding = [name for name, count in counts.items() if count == 1]
    return holding[0] if len(holding) == 1 and sorted(counts.values()) == [0, 1] else None


async def held_by(cli: Cli, workers: list[str], worker: str) -> bool:
    return await holder(cli, workers) == worker


async def counted(cli: Cli) -> int | None:
    said = await read(cli, APP, "/count")
    return int(said) if said and said.isdigit() else None


async def afresh(cli: Cli, mid: str) -> str | None:
    """The machine's events, once they say a live move fell back to booting it afresh."""
    events = await cli.ok("machine", "events", mid, "-a", APP)
    return events if "booted afresh: the live move failed" in events else None


async def test_a_running_vm_moves_live_with_its_memory(tmp_path: Path) -> None:
    built: list[str] = []
    async with up_cluster(tmp_path) as (cli, up):
        (registry,) = [c["registry"] for c in up.state()["components"]
                       if c["role"] == "registry"]
        workers = sorted(str(c["name"]) for c in up.state()["components"]
                         if c["role"] == "worker")
        try:
            with readable_dir() as apps:
                await cli.ok("deploy", "-c", str(vm_app(apps, APP)))
                built.append(f"{registry}/{APP}:v1")
            machines = await cli.machines(APP)
            for extra in machines[1:]:  # one machine: the worker that holds it says so
                await cli.ok("machine", "destroy", extra["id"], "-a", APP, "--force")
            mid = str(machines[0]["id"])
            here = await until(lambda: holder(cli, workers), timeout=60)
            there = next(w for w in workers if w != here)
            boot = await until(lambda: read(cli, APP, "/boot"), timeout=120)
            await cli.ok("machine", "exec", mid, "-a", APP, "--", "/bin/busybox", "sh", "-c",
                         "echo kept > /dev/shm/www/note")
            before = await until(lambda: counted(cli))
            assert len(qemus(mid)) == 1

            async with polled(cli, APP) as gaps:
                said = await cli.ok("machine", "move", mid, "--to", there, "-a", APP)
                assert said.strip() == f"Machine {mid}: moved to worker {there} (started)"
                assert await until(lambda: holder(cli, workers), timeout=60) == there
                after = await until(lambda: counted(cli), timeout=60)
                await asyncio.sleep(1.0)
            # Not rebooted: the same boot, its counter on from where it was, its tmpfs kept.
            assert await read(cli, APP, "/boot") == boot
            assert after > before, (before, after)
            assert await read(cli, APP, "/note") == "kept"
            assert gaps.counts == sorted(gaps.counts), "the counter went back: a reboot"
            listed = await cli.machines(APP)
            assert [(m["id"], m["state"]) for m in listed] == [(mid, "started")]
            events = await cli.ok("machine", "events", mid, "-a", APP)
            assert "live from " + here in events, events
            paused = re.search(r"the guest paused (\d+) ms", events)
            assert paused is not None, events
            assert len(qemus(mid)) == 1
            print(f"live move: the guest paused {paused.group(1)} ms, "
                  f"longest gap through the proxy {gaps.longest * 1000:.0f} ms, "
                  f"{gaps.failed} failed of {gaps.answered + gaps.failed}")

            # The source killed with SIGKILL while the VM's state streams: one copy at the end.
            (pid,) = [c["pid"] for c in up.state()["components"] if c.get("name") == there]
            relay = CONTROL_DIR / f"{mid}.out"
            moving = asyncio.create_task(cli.run("machine", "move", mid, "--to", here,
                                                 "-a", APP))

            async def relaying() -> bool:
                return relay.exists()

            await until(relaying, timeout=120, every=0.002)
            os.kill(int(pid), signal.SIGKILL)
            await moving  # it ends as it may: the worker that answers for it went away

            async def settled() -> bool:
                listed = await cli.machines(APP)
                return [m["state"] for m in listed] == ["started"] and \
                    len(qemus(mid)) == 1 and await counted(cli) is not None

            await until(settled, timeout=180)
            await asyncio.sleep(3.0)  # and stays so
            assert len(qemus(mid)) == 1
            assert await counted(cli) is not None

            # The target killed once it took the machine, before the VM's state came: the
            # stream has nowhere to go, so the move falls back to what a move does for any
            # machine (the target boots it afresh), and the event says so; one copy.
            await until(lambda: held_by(cli, workers, here), timeout=60)
            source, target = here, there
            boot = await until(lambda: read(cli, APP, "/boot"), timeout=60)
            (pid,) = [c["pid"] for c in up.state()["components"] if c.get("name") == target]
            staged = up.data_dir / "workers" / target / "machines" / mid / "vm" / "arrival.json"

            moving = asyncio.create_task(cli.run("machine", "move", mid, "--to", target,
                                                 "-a", APP))

            async def arriving() -> bool:
                return staged.exists() or moving.done()

            await until(arriving, timeout=120, every=0.002)
            assert not moving.done(), f"the move ended before its target took it: {moving.result()}"
            os.kill(int(pid), signal.SIGKILL)
            await moving
            await until(settled, timeout=180)
            await until(lambda: held_by(cli, workers, target), timeout=60)
            events = await until(lambda: afresh(cli, mid), timeout=60)
            assert f"from {source}" in events, events
            assert await until(lambda: read(cli, APP, "/boot"), timeout=60) != boot
            await asyncio.sleep(3.0)
            assert len(qemus(mid)) == 1
        finally:
            for reference in built:
                subprocess.run(["buildah", "rmi", "-f", reference], capture_output=True,
                               check=False)
