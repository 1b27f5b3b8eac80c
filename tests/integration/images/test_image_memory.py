"""An image machine's memory limit, set live on the cgroup runc made for it (oci driver)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.model.errors import BadRequest

from ..daemon_kit import running_worker_daemon
from .image_kit import build_image, needs_image_tools, registry
from .test_image_machines import fetch, image_machine, worker_args

pytestmark = needs_image_tools
MIB = 1024 * 1024


async def test_an_image_machine_s_limit_is_its_runc_cgroup_s(tmp_path: Path) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/mem:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            machine = await image_machine(client, image)
            await fetch(f"http://{machine.private_ip}:8080/")  # runc has it running
            done = await client.call("POST", machine.id, "exec", json={"command": [
                "/bin/sh", "-c", "dd if=/dev/urandom of=/cache.bin bs=1M count=32 2>/dev/null;"
                " cat /proc/self/cgroup"]})
            assert done["exit_code"] == 0, done
            path = next(line.split(":", 2)[2] for line in done["stdout"].splitlines()
                        if "memory" in line.split(":", 2)[1].split(","))
            cgroup = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            assert int((cgroup / "memory.limit_in_bytes").read_text()) == 256 * MIB

            lowered = await client.call("PUT", machine.id, "memory", json={"limit_mb": 160})
            assert lowered["limit_mb"] == 160
            assert int((cgroup / "memory.limit_in_bytes").read_text()) == 160 * MIB
            with pytest.raises(BadRequest, match="above"):
                await client.call("PUT", machine.id, "memory", json={"limit_mb": 300})
            reclaimed = await client.call("POST", machine.id, "memory/reclaim",
                                          json={"amount_mb": 16})
            assert reclaimed["actual_mb"] >= 8  # the file's page cache, charged to the machine

            await client.stop(machine.id, signal="SIGTERM", timeout="5s")
            await client.wait(machine.id, "stopped", timeout=30)
            await client.start(machine.id)
            await client.wait(machine.id, "started", timeout=30)
            assert int((cgroup / "memory.limit_in_bytes").read_text()) == 160 * MIB
            await client.destroy(machine.id, force=True)
            await client.wait(machine.id, "destroyed", timeout=30)
