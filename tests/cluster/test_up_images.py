"""`bodega up` runs an image registry; an image pushed there runs through the public API."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bodega.worker.drivers.vm.initramfs import DEFAULT_KERNEL_DIR
from tests.cidr_kit import machine_cidr
from tests.cluster.up_kit import UpProcess, free_port, unwire
from tests.integration.images.image_kit import build_image, needs_image_tools

pytestmark = needs_image_tools


@dataclass(frozen=True)
class ImagesUp:
    up: UpProcess
    http: httpx.AsyncClient  # the Machines API, with the cluster's token
    proxy: int  # the proxy's HTTP port
    registry: str  # host:port of the cluster's registry


@contextlib.asynccontextmanager
async def images_up(tmp_path: Path, workers: int, tls_port: int) -> AsyncIterator[ImagesUp]:
    """A `bodega up` of ``workers`` in ams with its registry; stopped, its kernel objects
    removed, on the way out."""
    api, proxy, registry = free_port(), free_port(), free_port()
    up = await UpProcess(
        tmp_path / "cluster", "--regions", "ams", "--workers-per-region", str(workers),
        "--api-port", str(api), "--proxy-port", str(proxy),
        "--proxy-tls-port", str(tls_port), "--registry-port", str(registry),
        "--machine-cidr", machine_cidr(100, 200)).start()
    try:
        await up.until_line("bodega is up")
        headers = {"authorization": f"Bearer {up.token()}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api}", headers=headers,
                                     timeout=60) as http:
            yield ImagesUp(up, http, proxy, f"127.0.0.1:{registry}")
    finally:
        assert await up.stop() == 0, up.output[-2000:]
        await unwire(tmp_path / "cluster")


async def test_up_serves_a_registry_and_runs_images_pushed_to_it(tmp_path: Path) -> None:
    async with images_up(tmp_path, workers=2, tls_port=free_port()) as cluster:
        http, proxy = cluster.http, cluster.proxy
        roles = {c["role"]: c for c in cluster.up.state()["components"]}
        assert roles["registry"]["url"] == f"https://{cluster.registry}"
        assert (tmp_path / "cluster" / "images" / "registry.yml").exists()
        image = await asyncio.to_thread(build_image, tmp_path, cluster.registry, "demo/web:v1",
                                        cluster=tmp_path / "cluster")
        app = {"app_name": "web", "org_slug": "personal"}
        assert (await http.post("/v1/apps", json=app)).status_code == 201
        created = await http.post("/v1/apps/web/machines", json={"config": {
            "image": image, "services": [{"protocol": "tcp", "internal_port": 8080,
                                          "ports": [{"port": 80, "handlers": ["http"]}]}]}})
        assert created.status_code == 200, created.text
        mid = created.json()["id"]
        waited = await http.get(f"/v1/apps/web/machines/{mid}/wait",
                                params={"state": "started", "timeout": 60})
        assert waited.status_code == 200, waited.text
        async with httpx.AsyncClient(timeout=30) as web:
            for _ in range(200):
                answer = await web.get(f"http://127.0.0.1:{proxy}/",
                                       headers={"host": "web.localhost"})
                if answer.status_code == 200:
                    break
                await asyncio.sleep(0.1)
        assert answer.text == "hello from an image\n"
        done = await http.post(f"/v1/apps/web/machines/{mid}/exec",
                               json={"command": ["cat", "/www/index.html"]})
        assert done.json()["stdout"] == "hello from an image\n", done.text

        # The worker that pulled the image publishes it; placement then prefers it.
        placed = (await http.get(f"/v1/apps/web/machines/{mid}/placement")).json()
        holder = placed["winner"]["worker"]
        assert (await http.delete(f"/v1/apps/web/machines/{mid}",
                                  params={"force": "true"})).status_code == 200
        for _ in range(3):
            again = await http.post("/v1/apps/web/machines", json={"config": {
                "image": image}})
            assert again.status_code == 200, again.text
            other = again.json()["id"]
            placed = (await http.get(f"/v1/apps/web/machines/{other}/placement")).json()
            assert placed["winner"]["worker"] == holder, placed
            assert placed["winner"]["subscores"]["image"] > 0, placed
            assert (await http.delete(f"/v1/apps/web/machines/{other}",
                                      params={"force": "true"})).status_code == 200


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu")
@pytest.mark.skipif(not any(DEFAULT_KERNEL_DIR.glob("boot/vmlinuz-*")),
                    reason="needs the vm kernel (scripts/host-packages)")
async def test_a_vm_on_up_is_reached_as_any_machine_and_mounts_its_volume(
        tmp_path: Path) -> None:
    """On the private network (its address a /128, its gateway off every prefix), through
    the proxy, by exec, with a volume created through the API."""
    async with images_up(tmp_path, workers=1, tls_port=0) as cluster:
        http, proxy = cluster.http, cluster.proxy
        image = await asyncio.to_thread(build_image, tmp_path, cluster.registry, "demo/vm:v1",
                                        cluster=tmp_path / "cluster")
        app = {"app_name": "vmweb", "org_slug": "personal"}
        assert (await http.post("/v1/apps", json=app)).status_code == 201
        volume = await http.post("/v1/apps/vmweb/volumes",
                                 json={"name": "data", "size_gb": 1, "region": "ams"})
        assert volume.status_code == 200, volume.text
        created = await http.post("/v1/apps/vmweb/machines", json={"config": {
            "image": image, "guest": {"cpus": 1, "memory_mb": 256, "isolation": "vm"},
            "mounts": [{"volume": volume.json()["id"], "path": "/data"}],
            "services": [{"protocol": "tcp", "internal_port": 8080,
                          "ports": [{"port": 80, "handlers": ["http"]}]}]}})
        assert created.status_code == 200, created.text
        machine = created.json()
        assert ":" in machine["private_ip"], "its 6PN address"
        waited = await http.get(f"/v1/apps/vmweb/machines/{machine['id']}/wait",
                                params={"state": "started", "timeout": 60})
        assert waited.status_code == 200, waited.text
        async with httpx.AsyncClient(timeout=1) as web:
            for url, host in ((f"http://[{machine['private_ip']}]:8080/", None),
                              (f"http://127.0.0.1:{proxy}/", "vmweb.localhost")):
                answer = None
                deadline = time.monotonic() + 90  # a boot under emulation, on a busy host
                while time.monotonic() < deadline:
                    with contextlib.suppress(httpx.HTTPError):
                        answer = await web.get(url, headers={"host": host} if host else {})
                        if answer.status_code == 200:
                            break
                    await asyncio.sleep(0.2)
                assert answer is not None, url
                assert answer.text == "hello from an image\n", url
        done = await http.post(f"/v1/apps/vmweb/machines/{machine['id']}/exec", json={
            "command": ["sh", "-c", "cat /proc/version; echo kept > /data/note"]})
        assert done.status_code == 200, done.text
        assert done.json()["stdout"].startswith("Linux version")
        assert done.json()["stdout"] != Path("/proc/version").read_text()
        notes = list((tmp_path / "cluster").rglob(f"{volume.json()['id']}/note"))
        assert [n.read_text() for n in notes] == ["kept\n"], notes
        assert (await http.delete(f"/v1/apps/vmweb/machines/{machine['id']}",
                                  params={"force": "true"})).status_code == 200
