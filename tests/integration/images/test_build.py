"""`bodega build`: a Dockerfile built with buildah, pushed to a real registry, pulled back."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bodega.worker.images.puller import Puller
from bodega.worker.images.registry_client import RegistryClient
from bodega.worker.images.store import ImageStore

from .image_kit import BUSYBOX, needs_image_tools, registry

pytestmark = [needs_image_tools,
              pytest.mark.skipif(shutil.which("buildah") is None, reason="needs buildah")]
EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "image-app"


def bodega(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bodega", *args], capture_output=True,
                          text=True, check=False, timeout=300)


async def test_build_pushes_the_example_app_and_it_pulls_back(tmp_path: Path) -> None:
    context = tmp_path / "app"
    shutil.copytree(EXAMPLE, context)
    shutil.copy(BUSYBOX, context / "busybox")
    async with registry(tmp_path) as host:
        done = await asyncio.to_thread(bodega, "build", str(context), "-t", "image-app:v1",
                                       "--registry", host)
        assert done.returncode == 0, done.stderr
        reference = done.stdout.strip()
        assert reference == f"{host}/image-app:v1"
        store = ImageStore(tmp_path / "images")
        digest = await Puller(store, RegistryClient()).pull(reference)
        assert store.image_config(digest).config.entrypoint == [
            "/bin/busybox", "httpd", "-f", "-p", "8080", "-h", "/www"]
        assert b"hello from an image" in (store.rootfs(digest) / "www" / "index.html").read_bytes()
    subprocess.run(["buildah", "rmi", "-f", reference], capture_output=True, check=False)


def test_build_without_a_cluster_or_registry_says_so_in_one_line(tmp_path: Path) -> None:
    done = bodega("build", str(EXAMPLE), "-t", "web:v1", "--data-dir", str(tmp_path))
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"Error: no cluster to talk to: no current context, and no cluster "
                           f"in {tmp_path} here;"), line
    assert line.endswith("; or push elsewhere with --registry host:port"), line
