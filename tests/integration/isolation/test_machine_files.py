"""config.files on a real worker, in every isolation: written into the machine's root before
its program runs, with their bytes and mode as the program sees them (an exec's ``cat``),
through an image's symlinks within the root, and again at every start, over what the
program made of them, and gone once an update drops their entry; a container's land in
its own layer, never in the image's base."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from bodega.model.machine_config import MachineConfig
from bodega.wire.internal.worker_calls import UpdateMachineBody
from bodega.wire.internal.worker_client import WorkerClient
from tests.integration.daemon_kit import running_worker_daemon
from tests.integration.images.image_kit import build_image, needs_image_tools, registry
from tests.integration.images.test_image_machines import fetch, worker_args
from tests.integration.isolation.test_isolation_contract import ISOLATIONS

pytestmark = needs_image_tools

CONF = b"listen 8080\nname 'files' $(not run)\n"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def run(client: WorkerClient, machine_id: str, *command: str) -> str:
    done: dict[str, Any] = await client.call("POST", machine_id, "exec",
                                             json={"command": list(command)})
    assert done["exit_code"] == 0, done
    return str(done["stdout"])


@pytest.mark.parametrize("isolation", ISOLATIONS)
async def test_files_are_in_the_root_at_every_start(tmp_path: Path, isolation: str) -> None:
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, f"test/files-{isolation}:v1")
        async with running_worker_daemon(tmp_path, **worker_args(host)) as (_daemon, client):
            conf = {"guest_path": "/app/conf/x.conf", "raw_value": b64(CONF), "mode": 0o640}
            config: dict[str, Any] = {
                "image": image, "guest": {"cpus": 1, "memory_mb": 256, "isolation": isolation},
                "files": [
                    conf,
                    # Served by the image's program (httpd), beside the image's own page.
                    {"guest_path": "/www/page.html", "raw_value": b64(b"from a file\n")},
                ]}
            machine = await client.create_machine({"app": "img", "config": config})
            await client.wait(machine.id, "started", timeout=60)
            url = f"http://{(await client.machine(machine.id)).private_ip}:8080/page.html"
            assert await fetch(url, 60) == "from a file\n"  # as the program serves it
            stat = ("/bin/busybox", "stat", "-c", "%a %u", "/app/conf/x.conf", "/app/conf",
                    "/www/page.html")
            assert await run(client, machine.id, "cat", "/app/conf/x.conf") == CONF.decode()
            assert await run(client, machine.id, *stat) == "640 0\n755 0\n644 0\n"
            assert await run(client, machine.id, "cat", "/www/index.html") == \
                "hello from an image\n"  # the image's own files stay as they were

            # What the program makes of a file is written over at the next start.
            await run(client, machine.id, "/bin/sh", "-c",
                      "echo changed > /app/conf/x.conf; rm /www/page.html")
            await client.call("POST", machine.id, "restart", json={"timeout": 20})
            await client.wait(machine.id, "started", timeout=60)
            assert await fetch(url, 60) == "from a file\n"
            assert await run(client, machine.id, "cat", "/app/conf/x.conf") == CONF.decode()

            # An update that drops a file's entry: the next start's root has no such file,
            # as a fresh root would not.
            updated = await client.update_machine(machine.id, UpdateMachineBody(
                config=MachineConfig.model_validate({**config, "files": [conf]})))
            await client.wait(machine.id, "started", timeout=60, version=updated.instance_id)
            assert await fetch(url.replace("page", "index"), 60) == "hello from an image\n"
            assert "404" in await fetch(url, 5)
            assert await run(client, machine.id, "cat", "/app/conf/x.conf") == CONF.decode()

            if isolation != "vm":  # a container's root: the image's base is shared, unchanged
                bases = list((tmp_path / "w1").rglob("bases/*/rootfs"))
                assert bases
                assert all(not (base / "app").exists() for base in bases)
                uppers = list((tmp_path / "w1" / "machines" / machine.id).rglob("upper"))
                assert (uppers[0] / "app" / "conf" / "x.conf").read_bytes() == CONF

            await client.destroy(machine.id, force=True)
            await client.wait(machine.id, "destroyed", timeout=60)
