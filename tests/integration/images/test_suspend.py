"""The oci driver's suspend: a frozen machine answers nothing, a thawed one carries on."""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from pathlib import Path

import httpx
import pytest

from bodega.worker.drivers.base import TaskSpec
from bodega.worker.drivers.oci import OciDriver
from bodega.worker.drivers.oci.core import runtimes
from bodega.worker.drivers.process.cgroups import Cgroups
from bodega.worker.host.image_drivers import unified_controllers
from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore

from .image_kit import build_image, free_port, needs_image_tools, registry
from .test_image_machines import fetch

pytestmark = needs_image_tools


@pytest.mark.parametrize("runtime", ["runc", "crun"])
async def test_suspend_freezes_and_resume_thaws_keeping_the_process(tmp_path: Path,
                                                                    runtime: str) -> None:
    if shutil.which(runtime) is None:
        pytest.skip(f"{runtime} is not installed on this host")
    async with registry(tmp_path) as host:
        image = build_image(tmp_path, host, "test/frozen:v1")
        scope = f"test-{uuid.uuid4().hex[:8]}"
        cgroups = Cgroups.detect(scope)
        driver = OciDriver(cgroups, Puller(ImageStore(tmp_path / "images"), RegistryClient()),
                           tmp_path / "machines", tmp_path / "runc", runtime=runtime,
                           runtime_command=runtimes.command(runtime, unified_controllers()))
        assert driver.capabilities.suspend is not None
        port = free_port()
        mid = uuid.uuid4().hex[:14]
        spec = TaskSpec(
            machine_id=mid, instance_id="01TESTINSTANCE000000000000", start_seq=1, app="app",
            image=image, argv=["/bin/httpd", "-f", "-p", f"127.0.0.1:{port}", "-h", "/www"],
            env={"PATH": "/bin"}, cpus=1, cpu_kind="shared", memory_mb=128,
            machine_dir=tmp_path / "machines" / mid)
        handle = await driver.start(spec)
        try:
            url = f"http://127.0.0.1:{port}/"
            assert await fetch(url) == "hello from an image\n"
            began = time.perf_counter()
            await driver.capabilities.suspend.suspend(handle)
            frozen = time.perf_counter() - began
            with pytest.raises(httpx.TimeoutException):
                async with httpx.AsyncClient() as client:
                    await client.get(url, timeout=1.0)
            assert await driver.inspect(handle), "a suspended machine is still there"
            began = time.perf_counter()
            await driver.capabilities.suspend.resume(handle)
            assert await fetch(url) == "hello from an image\n"
            thawed_until_answer = time.perf_counter() - began
            print(f"suspend {frozen * 1000:.1f} ms, resume until it answers "
                  f"{thawed_until_answer * 1000:.1f} ms")
        finally:
            await driver.stop(handle, 15, 5.0)
            await driver.destroy(mid, spec.machine_dir)
            if cgroups is not None:
                for path in cgroups.root.glob(f"*/bodega/{scope}"):
                    for _ in range(100):
                        try:
                            path.rmdir()
                            break
                        except OSError:
                            await asyncio.sleep(0.05)
